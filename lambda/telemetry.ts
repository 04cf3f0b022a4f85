/**
 * The telemetry port (app/telemetry.ts) on AWS: CloudWatch EMF lines through
 * Powertools, which Lambda's log pipeline turns into metrics. Only the
 * functions write EMF; elsewhere the port records into Prometheus and
 * OpenTelemetry (local/telemetry/). The alarms (lib/ratchet-alarms.ts) read
 * these metrics by the names and dimensions written here.
 */
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRIC, pollLabels, type Telemetry } from '../app/telemetry.ts';

/** Namespace `Ratchet`; Powertools adds `service` to every dimension set. */
export function createMetrics(serviceName = 'ratchet'): Metrics {
  return new Metrics({ namespace: 'Ratchet', serviceName });
}

/**
 * The port's names as EMF lines: each a metric of its own with its labels as
 * dimensions (beside `service`), so one dashboard reads every home. (The
 * gauges are the database's: on AWS, DynamoDB's and SQS's own metrics and the
 * reconcile's counts stand for them.)
 */
export function emfTelemetry(metrics: Metrics): Telemetry {
  type Unit = (typeof MetricUnit)[keyof typeof MetricUnit];
  /** An EMF line per value (a single metric is published as it is added), under these dimensions (an empty reason is `none`: CloudWatch refuses empty values). */
  const emit = (dimensions: Record<string, string>, values: Array<[name: string, unit: Unit, value: number]>) => {
    for (const [name, unit, value] of values) {
      const line = metrics.singleMetric();
      for (const [key, dimension] of Object.entries(dimensions)) line.addDimension(key, dimension || 'none');
      line.addMetric(name, unit, value);
    }
  };
  return {
    webhook: ({ decision, reason }, seconds) =>
      emit({ decision, reason }, [
        [METRIC.deliveries, MetricUnit.Count, 1],
        [METRIC.webhookSeconds, MetricUnit.Seconds, seconds],
      ]),
    effect: (sink, lagSeconds) => emit({ sink }, [[METRIC.effectLag, MetricUnit.Seconds, lagSeconds]]),
    poll: (kind, outcome) => emit(pollLabels(kind, outcome), [[METRIC.polls, MetricUnit.Count, 1]]),
  };
}
