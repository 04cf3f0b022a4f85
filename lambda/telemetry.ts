/**
 * The telemetry port (app/telemetry.ts) on AWS: CloudWatch EMF lines through
 * Powertools, which Lambda's log pipeline turns into metrics. Only the
 * functions write EMF; elsewhere the port records into Prometheus and
 * OpenTelemetry (local/telemetry/). The alarms (lib/ratchet-alarms.ts) read
 * these metrics by the names and dimensions written here.
 *
 * EMF lines are log bytes ($0.50 a GB ingested): values are kept through an
 * invocation and published once at its end (`publishedAfter`), one line per
 * set of dimensions with every value in it, not a line per value.
 */
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { METRIC, pollLabels, type Telemetry } from '../app/telemetry.ts';

/** Namespace `Ratchet`; Powertools adds `service` to every dimension set. */
export function createMetrics(serviceName = 'ratchet'): Metrics {
  return new Metrics({ namespace: 'Ratchet', serviceName });
}

/** The port, keeping its values until `flush` publishes them. */
export interface EmfTelemetry extends Telemetry {
  flush(): void;
}

type Unit = (typeof MetricUnit)[keyof typeof MetricUnit];

/**
 * The port's names as EMF (`batched`: kept until `flush`, which
 * `publishedAfter` calls at the invocation's end; otherwise published as each
 * call records them, one line a call): each a metric of its own with its labels as
 * dimensions (beside `service`), so one dashboard reads every home. (The
 * gauges are the database's: on AWS, DynamoDB's and SQS's own metrics and the
 * reconcile's counts stand for them.)
 */
export function emfTelemetry(metrics: Metrics, options: { batched?: boolean; serviceName?: string } = {}): EmfTelemetry {
  const { batched = false, serviceName = 'ratchet' } = options;
  /** Values by their dimensions (an empty reason is `none`: CloudWatch refuses empty values). */
  const pending = new Map<string, { dimensions: Record<string, string>; values: Array<[name: string, unit: Unit, value: number]> }>();
  const emit = (dimensions: Record<string, string>, values: Array<[name: string, unit: Unit, value: number]>) => {
    const named = Object.fromEntries(Object.entries(dimensions).map(([key, value]) => [key, value || 'none']));
    const key = JSON.stringify(named);
    const set = pending.get(key) ?? { dimensions: named, values: [] };
    set.values.push(...values);
    pending.set(key, set);
    if (!batched) telemetry.flush();
  };
  const telemetry: EmfTelemetry = {
    flush() {
      // One line per dimension set: Powertools groups a metric added more than once into one array of values.
      for (const { dimensions, values } of pending.values()) {
        const line = createMetrics(serviceName);
        line.addDimensions(dimensions);
        for (const [name, unit, value] of values) line.addMetric(name, unit, value);
        line.publishStoredMetrics();
      }
      pending.clear();
      if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
    },
    webhook: ({ decision, reason }, seconds) =>
      emit({ decision, reason }, [
        [METRIC.deliveries, MetricUnit.Count, 1],
        [METRIC.webhookSeconds, MetricUnit.Seconds, seconds],
      ]),
    effect: (sink, lagSeconds) => emit({ sink }, [[METRIC.effectLag, MetricUnit.Seconds, lagSeconds]]),
    poll: (kind, outcome) => emit(pollLabels(kind, outcome), [[METRIC.polls, MetricUnit.Count, 1]]),
  };
  return telemetry;
}

/**
 * `handler`, with the invocation's metrics (a `batched` telemetry's) published
 * once at its end, whether it returned or threw: one EMF line per dimension
 * set, not one per value.
 */
export function publishedAfter<A extends unknown[], R>(
  handler: (...args: A) => Promise<R>,
  telemetry: EmfTelemetry,
): (...args: A) => Promise<R> {
  return async (...args) => {
    try {
      return await handler(...args);
    } finally {
      telemetry.flush();
    }
  };
}
