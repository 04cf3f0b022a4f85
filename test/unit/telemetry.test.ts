/**
 * The telemetry port's pieces without a server: the gauges read from an
 * engine's counts and backlog, the Prometheus exposition, the fan-out to
 * several recorders, and OpenTelemetry left unloaded without an endpoint.
 * (The same names as CloudWatch EMF lines on AWS: lambda-telemetry.test.ts.)
 */
import { describe, expect, it } from 'vitest';
import { readGauges } from '../../app/gauges.ts';
import { allOf, otlpRequested, type Telemetry } from '../../app/telemetry.ts';
import { startTelemetry } from '../../local/telemetry/index.ts';
import { PrometheusMetrics } from '../../local/telemetry/prometheus.ts';
import { silentLogger } from '../support/silent-logger.ts';

const NOW = Date.parse('2026-12-06T12:00:00Z');
const source = {
  store: {
    counts: () => [
      { state: 'RUNNING' as const, kind: 'batch' as const, count: 3, overdue: 1, oldestOpenSince: '2026-12-06T11:00:00Z' },
      { state: null, kind: 'batch' as const, count: 2, overdue: 0, oldestOpenSince: '2026-12-06T10:00:00Z' },
      // A terminal row's own oldest is never an open job's.
      { state: 'SUCCEEDED' as const, kind: 'batch' as const, count: 40, overdue: 0, oldestOpenSince: '2026-12-01T00:00:00Z' },
      { state: 'SUCCEEDED' as const, kind: 'video' as const, count: 5, overdue: 0, oldestOpenSince: null },
      { state: 'RUNNING' as const, kind: 'openai-batch' as const, count: 4, overdue: 2, oldestOpenSince: '2026-12-06T11:30:00Z' },
    ],
  },
  effects: { backlog: () => [{ sink: 'webhook', pending: 4, retrying: 2, deadLettered: 1 }] },
};

describe('the database gauges', () => {
  it('give each kind its oldest open job’s age and overdue count (0 where none), each kind and state, each sink; a kind’s provider beside it', async () => {
    const values = await readGauges(source, NOW);
    const value = (name: string, labels: Record<string, string>) =>
      values.find((v) => v.name === name && JSON.stringify(v.labels) === JSON.stringify(labels))?.value;
    expect(value('ratchet_oldest_open_operation_age_seconds', { provider: 'gemini', kind: 'batch' })).toBe(7200);
    expect(value('ratchet_oldest_open_operation_age_seconds', { provider: 'gemini', kind: 'video' })).toBe(0);
    expect(value('ratchet_oldest_open_operation_age_seconds', { provider: 'openai', kind: 'openai-batch' })).toBe(1800);
    expect(value('ratchet_oldest_open_operation_age_seconds', { provider: 'anthropic', kind: 'anthropic-batch' })).toBe(0);
    expect(value('ratchet_overdue_operations', { provider: 'gemini', kind: 'batch' })).toBe(1);
    expect(value('ratchet_overdue_operations', { provider: 'gemini', kind: 'interaction' })).toBe(0);
    expect(value('ratchet_overdue_operations', { provider: 'openai', kind: 'openai-batch' })).toBe(2);
    expect(value('ratchet_overdue_operations', { provider: 'azure-openai', kind: 'azure-openai-batch' })).toBe(0);
    expect(value('ratchet_operations', { provider: 'gemini', kind: 'batch', state: 'tracked' })).toBe(2);
    expect(value('ratchet_operations', { provider: 'gemini', kind: 'batch', state: 'SUCCEEDED' })).toBe(40);
    expect(value('ratchet_operations', { provider: 'openai', kind: 'openai-batch', state: 'RUNNING' })).toBe(4);
    expect(value('ratchet_effects_pending', { sink: 'webhook' })).toBe(4);
    expect(value('ratchet_effects_retrying', { sink: 'webhook' })).toBe(2);
    expect(value('ratchet_effects_dead_lettered', { sink: 'webhook' })).toBe(1);
  });

  it('leave the effects out while they are off', async () => {
    const values = await readGauges({ store: source.store, effects: undefined }, NOW);
    expect(values.some((v) => v.name.startsWith('ratchet_effects_'))).toBe(false);
  });
});

describe('the Prometheus exposition', () => {
  it('counts, times and reads the gauges afresh at each scrape (a label gone from the data is gone from the page)', async () => {
    const prometheus = new PrometheusMetrics();
    prometheus.webhook({ decision: 'applied', reason: '' }, 0.004);
    prometheus.webhook({ decision: 'discarded', reason: 'duplicate' }, 0.002);
    prometheus.effect('webhook', 1.5);
    prometheus.poll('batch', 'unchanged');
    prometheus.poll('anthropic-batch', 'refused');
    let text = await prometheus.scrape(source);
    expect(text).toContain('ratchet_webhook_deliveries_total{decision="applied",reason=""} 1');
    expect(text).toContain('ratchet_webhook_deliveries_total{decision="discarded",reason="duplicate"} 1');
    expect(text).toContain('ratchet_webhook_duration_seconds_bucket{le="0.0025"} 1');
    expect(text).toContain('ratchet_webhook_duration_seconds_count 2');
    expect(text).toContain('ratchet_effect_lag_seconds_bucket{le="2.5",sink="webhook"} 1');
    expect(text).toContain('ratchet_reconcile_polls_total{provider="gemini",kind="batch",outcome="unchanged"} 1');
    expect(text).toContain('ratchet_reconcile_polls_total{provider="anthropic",kind="anthropic-batch",outcome="refused"} 1');
    expect(text).toContain('ratchet_operations{provider="gemini",kind="video",state="SUCCEEDED"} 5');
    expect(text).toContain('ratchet_operations{provider="openai",kind="openai-batch",state="RUNNING"} 4');
    expect(text).toContain('ratchet_effects_retrying{sink="webhook"} 2');
    text = await prometheus.scrape({ store: { counts: () => [] }, effects: undefined });
    expect(text).not.toContain('state="SUCCEEDED"');
    expect(text).not.toContain('sink="webhook"} 2');
    expect(text).toContain('ratchet_overdue_operations{provider="gemini",kind="batch"} 0');
    expect(text).toContain('ratchet_overdue_operations{provider="bedrock",kind="bedrock-batch"} 0');
    expect(prometheus.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it('still serves the counters while the database cannot be read, the gauges left out, and says so', async () => {
    const unread: unknown[] = [];
    const prometheus = new PrometheusMetrics((error) => unread.push(error));
    prometheus.webhook({ decision: 'not-recorded', reason: 'not-recorded' }, 0.3);
    const away = {
      store: { counts: () => Promise.reject(new Error('the database does not answer')) },
      effects: { backlog: () => [] },
    };
    const text = await prometheus.scrape(away);
    expect(text).toContain('ratchet_webhook_deliveries_total{decision="not-recorded",reason="not-recorded"} 1');
    expect(text).not.toMatch(/^ratchet_operations\{/m);
    expect(text).not.toMatch(/^ratchet_overdue_operations\{/m);
    expect(unread).toEqual([new Error('the database does not answer')]);
  });
});

describe('recording', () => {
  it('fans out to every recorder, and spans come from the one that traces', () => {
    const calls: string[] = [];
    const recorder = (id: string, traces = false): Telemetry => ({
      webhook: (outcome) => calls.push(`${id} webhook ${outcome.decision}`),
      effect: (sink) => calls.push(`${id} effect ${sink}`),
      poll: (kind, outcome) => calls.push(`${id} poll ${kind} ${outcome}`),
      ...(traces && {
        span: (name: string) => {
          calls.push(`${id} span ${name}`);
          return { set: () => {}, end: () => {}, traceparent: () => undefined };
        },
      }),
    });
    const both = allOf(recorder('a'), recorder('b', true));
    both.webhook({ decision: 'applied', reason: '' }, 0.1);
    both.effect('app', 1);
    both.poll('video', 'failed');
    both.span?.('ratchet.webhook', {});
    expect(calls).toEqual([
      'a webhook applied',
      'b webhook applied',
      'a effect app',
      'b effect app',
      'a poll video failed',
      'b poll video failed',
      'b span ratchet.webhook',
    ]);
    expect(allOf(recorder('c')).span).toBeUndefined();
  });

  it('loads no OpenTelemetry without an endpoint: the Prometheus registry alone, nothing traced', async () => {
    expect(otlpRequested({})).toBe(false);
    expect(otlpRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(otlpRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' })).toBe(false);
    const saved = { ...process.env };
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    delete process.env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT;
    try {
      const local = await startTelemetry(silentLogger);
      expect(local.telemetry).toBe(local.prometheus);
      expect(local.telemetry.span).toBeUndefined();
    } finally {
      Object.assign(process.env, saved);
    }
  });
});
