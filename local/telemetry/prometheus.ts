/**
 * `GET /metrics`: the Prometheus text format, by prom-client. The counters and
 * histograms are this instance's (each instance is a target, as Prometheus
 * expects); the gauges are the database's, read at each scrape (gauges.ts).
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { GAUGES, type GaugeName, type MetricsSource, readGauges } from '../../app/gauges.ts';
import { EFFECT_LAG_BUCKETS, METRIC, type PollOutcome, pollLabels, type Telemetry, WEBHOOK_SECONDS_BUCKETS } from '../../app/telemetry.ts';
import type { OperationKind } from '../../core/lifecycle.ts';

export class PrometheusMetrics implements Telemetry {
  readonly contentType: string;
  private readonly registry = new Registry();
  private readonly deliveries = new Counter({
    name: METRIC.deliveries,
    help: 'Webhook deliveries answered, by decision (the decisions log’s words; unauthenticated: a 401) and reason.',
    labelNames: ['decision', 'reason'] as const,
    registers: [this.registry],
  });
  private readonly webhookSeconds = new Histogram({
    name: METRIC.webhookSeconds,
    help: 'Seconds from a webhook’s receipt to its answer.',
    buckets: WEBHOOK_SECONDS_BUCKETS,
    registers: [this.registry],
  });
  private readonly effectLag = new Histogram({
    name: METRIC.effectLag,
    help: 'Seconds from a change’s commit to its acceptance by the sink.',
    labelNames: ['sink'] as const,
    buckets: EFFECT_LAG_BUCKETS,
    registers: [this.registry],
  });
  private readonly polls = new Counter({
    name: METRIC.polls,
    help: "Reconcile polls of each provider's jobs, by provider, kind and outcome.",
    labelNames: ['provider', 'kind', 'outcome'] as const,
    registers: [this.registry],
  });
  private readonly gauges = Object.fromEntries(
    Object.entries(GAUGES).map(([name, help]) => [
      name,
      new Gauge({ name, help, labelNames: ['provider', 'kind', 'state', 'sink'], registers: [this.registry] }),
    ]),
  ) as Record<GaugeName, Gauge>;

  /** `onGaugesUnread`: told when the database could not be read for a scrape (which then carries the counters alone). */
  constructor(private readonly onGaugesUnread?: (error: unknown) => void) {
    this.contentType = this.registry.contentType;
  }

  webhook({ decision, reason }: { decision: string; reason: string }, seconds: number): void {
    this.deliveries.inc({ decision, reason });
    this.webhookSeconds.observe(seconds);
  }

  effect(sink: string, lagSeconds: number): void {
    this.effectLag.observe({ sink }, lagSeconds);
  }

  poll(kind: OperationKind, outcome: PollOutcome): void {
    this.polls.inc(pollLabels(kind, outcome));
  }

  /**
   * The exposition: the gauges read afresh from the database, then everything
   * in the text format. Scrapes at once take turns, so none writes its gauges
   * while another's are being serialized.
   */
  scrape(source: MetricsSource): Promise<string> {
    const turn = this.scraping.then(async () => {
      // The database away: this instance's counters still go out (the 503s it answered are what to alert on), the gauges not.
      const values = await readGauges(source).catch((error: unknown) => {
        this.onGaugesUnread?.(error);
        return [];
      });
      for (const gauge of Object.values(this.gauges)) gauge.reset();
      for (const { name, labels, value } of values) this.gauges[name].set(labels, value);
      return this.registry.metrics();
    });
    this.scraping = turn.catch(() => undefined);
    return turn;
  }

  private scraping: Promise<unknown> = Promise.resolve();
}
