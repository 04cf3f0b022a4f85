/**
 * What Ratchet tells dashboards, as a port: each webhook's decision and how
 * long it took, each effect's delivery per sink and its lag, each reconcile
 * poll's outcome, and spans around a delivery's steps. Every home records into
 * one of these: the Prometheus registry served at `GET /metrics` (with
 * OpenTelemetry beside it when OTEL_EXPORTER_OTLP_ENDPOINT is set:
 * local/telemetry/), or CloudWatch EMF lines on AWS (lambda/telemetry.ts).
 * The names are the contract's (docs/operations.md, "Metrics"): the same in
 * every home, so one dashboard reads them all.
 *
 * No label carries an operation's name or anything else unbounded: decisions,
 * reasons, providers, kinds, states, sinks and outcomes are closed sets. Where
 * a kind is a label, its provider is one beside it (a dashboard filters by it).
 */
import { type OperationKind, type ProviderName, providerOf } from '../core/lifecycle.ts';
import { ConfigError } from './config.ts';

/** What became of a webhook delivery, in the decisions log's words (`unauthenticated`: its signature refused, a 401). */
export type WebhookDecision =
  | 'applied'
  | 'discarded'
  | 'unprocessable'
  | 'ignored'
  | 'verifying-by-poll'
  | 'unauthenticated'
  | 'rate-limited'
  | 'not-recorded'
  | 'not-configured'
  | 'failed';

/** A delivery's decision and its reason (`''` where the decision is all there is to say). */
export interface WebhookOutcome {
  decision: WebhookDecision;
  reason: string;
}

/** How one reconcile poll went. */
export type PollOutcome = 'applied' | 'unchanged' | 'failed' | 'not-found' | 'refused' | 'unknown-state';

/** A step of a delivery's trace: attributes to add as it goes, and its end. */
export interface StepSpan {
  set(attributes: Record<string, string | number | boolean>): void;
  end(error?: unknown): void;
  /** The W3C `traceparent` of this step, carried with what it writes so later steps (each effect's delivery) link back to it. */
  traceparent(): string | undefined;
}

export interface Telemetry {
  webhook(outcome: WebhookOutcome, seconds: number): void;
  /** An effect `sink` accepted, `lagSeconds` after its change was committed. */
  effect(sink: string, lagSeconds: number): void;
  /** One poll of a job of `kind` (its provider's, labelled `provider` beside it: pollLabels). */
  poll(kind: OperationKind, outcome: PollOutcome): void;
  /**
   * A span (OpenTelemetry on): `parent` a step of this process or a stored
   * `traceparent` of another (then linked, not parented). Absent where nothing
   * traces: callers skip the work of naming their steps.
   */
  span?(name: string, attributes: Record<string, string | number | boolean>, parent?: StepSpan | string): StepSpan;
}

/** The metrics' names, one place: Prometheus's, OpenTelemetry's and EMF's. */
export const METRIC = {
  deliveries: 'ratchet_webhook_deliveries_total',
  webhookSeconds: 'ratchet_webhook_duration_seconds',
  operations: 'ratchet_operations',
  oldestOpen: 'ratchet_oldest_open_operation_age_seconds',
  overdue: 'ratchet_overdue_operations',
  effectsPending: 'ratchet_effects_pending',
  effectsRetrying: 'ratchet_effects_retrying',
  effectsDead: 'ratchet_effects_dead_lettered',
  effectLag: 'ratchet_effect_lag_seconds',
  polls: 'ratchet_reconcile_polls_total',
} as const;

/** A poll's labels in every home: its provider, its kind and its outcome. */
export function pollLabels(
  kind: OperationKind,
  outcome: PollOutcome,
): { provider: ProviderName; kind: OperationKind; outcome: PollOutcome } {
  return { provider: providerOf(kind), kind, outcome };
}

/** Seconds from receipt to answer: a write on a local file is a few milliseconds, across a network tens. */
export const WEBHOOK_SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Seconds from commit to a sink's acceptance: milliseconds when all is well, up to hours while a receiver is down. */
export const EFFECT_LAG_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400];

/** Records into several at once (the Prometheus registry and OpenTelemetry); spans from the one that traces. */
export function allOf(...all: Telemetry[]): Telemetry {
  const tracing = all.find((one) => one.span);
  return {
    webhook: (outcome, seconds) => {
      for (const one of all) one.webhook(outcome, seconds);
    },
    effect: (sink, lagSeconds) => {
      for (const one of all) one.effect(sink, lagSeconds);
    },
    poll: (kind, outcome) => {
      for (const one of all) one.poll(kind, outcome);
    },
    ...(tracing?.span && { span: tracing.span.bind(tracing) }),
  };
}

/** Whether the process environment asks for OTLP export (the SDK reads the rest of the standard OTEL_* variables itself). */
export function otlpRequested(env: Record<string, string | undefined> = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT);
}

type Protocol = 'http/protobuf' | 'http/json';

/** The signal's protocol: its own variable, else the general one, else `http/protobuf` (the specification's default). */
function protocolOf(signal: 'TRACES' | 'METRICS', env: Record<string, string | undefined>): Protocol {
  const name = env[`OTEL_EXPORTER_OTLP_${signal}_PROTOCOL`] ? `OTEL_EXPORTER_OTLP_${signal}_PROTOCOL` : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const value = env[name] ?? 'http/protobuf';
  if (value === 'http/protobuf' || value === 'http/json') return value;
  throw new ConfigError(`${name} must be http/protobuf or http/json (gRPC is not built in), not ${JSON.stringify(value)}`, name);
}

/**
 * What Ratchet itself reads of the OTEL_* variables (the SDK reads the rest),
 * checked without loading the SDK: a start refuses a bad one at once, one
 * line naming it (ConfigError, exit 2).
 */
export function openTelemetrySettings(env: Record<string, string | undefined> = process.env): {
  traces: Protocol;
  metrics: Protocol;
  intervalMs: number;
} {
  const intervalMs = Number(env.OTEL_METRIC_EXPORT_INTERVAL ?? 60_000);
  if (!Number.isInteger(intervalMs) || intervalMs <= 0)
    throw new ConfigError('OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds above 0', 'OTEL_METRIC_EXPORT_INTERVAL');
  return { traces: protocolOf('TRACES', env), metrics: protocolOf('METRICS', env), intervalMs };
}

/** Seconds since `since` (an ISO time; 0 when it does not parse or lies ahead). */
export function secondsSince(since: string, nowMs = Date.now()): number {
  const at = Date.parse(since);
  return Number.isFinite(at) ? Math.max(0, (nowMs - at) / 1000) : 0;
}
