/**
 * What a home off AWS records into: the Prometheus registry `GET /metrics`
 * serves, always (a counter's increment is all it costs), and OpenTelemetry
 * beside it only when the process environment names an OTLP endpoint
 * (OTEL_EXPORTER_OTLP_ENDPOINT, or the traces' or metrics' own): its SDK is
 * loaded then and only then, so without it nothing is exported and nothing
 * traced costs a thing.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { MetricsSource } from '../../app/gauges.ts';
import { allOf, otlpRequested, type Telemetry } from '../../app/telemetry.ts';
import { PrometheusMetrics } from './prometheus.ts';

export interface LocalTelemetry {
  telemetry: Telemetry;
  prometheus: PrometheusMetrics;
  /** Where OpenTelemetry reads the database's gauges at each export (the engine, once open). */
  observe(source: MetricsSource): void;
  /** Exports what is left and stops (OpenTelemetry's last batch); nothing to do without it. */
  shutdown(): Promise<void>;
}

export async function startTelemetry(logger: Logger): Promise<LocalTelemetry> {
  const prometheus = new PrometheusMetrics((error) =>
    logger.warn('metrics: the database could not be read for the gauges; this scrape carries the counters alone', {
      detail: (error as Error).message,
    }),
  );
  if (!otlpRequested()) return { telemetry: prometheus, prometheus, observe: () => {}, shutdown: async () => {} };
  const { startOpenTelemetry } = await import('./otel.ts');
  const otel = startOpenTelemetry(logger);
  return { telemetry: allOf(prometheus, otel.telemetry), prometheus, observe: otel.observe, shutdown: () => otel.shutdown() };
}
