/** The telemetry port on AWS (lambda/telemetry.ts): the same names as CloudWatch EMF lines, their labels as dimensions. */
import { Metrics } from '@aws-lambda-powertools/metrics';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { emfTelemetry } from '../../lambda/telemetry.ts';

describe('on AWS (EMF)', () => {
  afterEach(() => {
    vi.restoreAllMocks();
    vi.unstubAllEnvs();
  });

  it('writes the same names as CloudWatch EMF lines, their labels as dimensions', () => {
    vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
    const lines: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    const telemetry = emfTelemetry(new Metrics({ namespace: 'Ratchet', serviceName: 'ratchet' }));
    telemetry.webhook({ decision: 'discarded', reason: 'duplicate' }, 0.012);
    telemetry.webhook({ decision: 'applied', reason: '' }, 0.02);
    telemetry.effect('eventbridge', 2);
    telemetry.poll('batch', 'applied');
    telemetry.poll('openai-fine-tuning', 'failed');
    const emitted = lines.map((line) => JSON.parse(line));
    const named = (name: string) => emitted.filter((one) => name in one);
    expect(named('ratchet_webhook_deliveries_total').map((one) => [one.decision, one.reason])).toEqual([
      ['discarded', 'duplicate'],
      ['applied', 'none'],
    ]);
    expect(named('ratchet_webhook_duration_seconds')[0]).toMatchObject({ ratchet_webhook_duration_seconds: 0.012, decision: 'discarded' });
    expect(named('ratchet_effect_lag_seconds')[0]).toMatchObject({ ratchet_effect_lag_seconds: 2, sink: 'eventbridge' });
    expect(named('ratchet_reconcile_polls_total').map((one) => [one.provider, one.kind, one.outcome])).toEqual([
      ['gemini', 'batch', 'applied'],
      ['openai', 'openai-fine-tuning', 'failed'],
    ]);
    expect(named('ratchet_reconcile_polls_total')[0]._aws.CloudWatchMetrics[0].Dimensions).toEqual([
      expect.arrayContaining(['provider', 'kind', 'outcome']),
    ]);
    const [first] = named('ratchet_webhook_deliveries_total');
    expect(first._aws.CloudWatchMetrics[0]).toMatchObject({
      Namespace: 'Ratchet',
      Dimensions: [expect.arrayContaining(['decision', 'reason'])],
      Metrics: [
        { Name: 'ratchet_webhook_deliveries_total', Unit: 'Count' },
        { Name: 'ratchet_webhook_duration_seconds', Unit: 'Seconds' },
      ],
    });
  });

  it('batched: nothing until the flush, then one line per set of dimensions, each metric with all its values', () => {
    vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
    const lines: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      lines.push(String(chunk));
      return true;
    });
    const metrics = new Metrics({ namespace: 'Ratchet', serviceName: 'ratchet' });
    const telemetry = emfTelemetry(metrics, { batched: true });
    for (const lag of [1, 2, 3]) {
      telemetry.effect('webhook', lag);
      metrics.addMetric('EffectDelivered', 'Count', 1);
    }
    telemetry.effect('eventbridge', 4);
    expect(lines).toEqual([]);
    telemetry.flush();
    const emitted = lines.map((line) => JSON.parse(line));
    expect(emitted.map((one) => [one.sink, one.ratchet_effect_lag_seconds, one.EffectDelivered])).toEqual([
      ['webhook', [1, 2, 3], undefined],
      ['eventbridge', 4, undefined],
      [undefined, undefined, [1, 1, 1]],
    ]);
    lines.length = 0;
    telemetry.flush();
    expect(lines).toEqual([]);
  });
});
