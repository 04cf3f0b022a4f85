/**
 * OpenTelemetry, loaded only when an OTLP endpoint is set (index.ts): the
 * same metrics as `/metrics` and a trace per delivery, exported over OTLP by
 * the SDK's own exporters, which read the standard variables themselves
 * (OTEL_EXPORTER_OTLP_ENDPOINT and its per-signal forms, _HEADERS, _TIMEOUT,
 * _COMPRESSION, the certificates; OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES;
 * OTEL_BSP_*). OTEL_EXPORTER_OTLP_PROTOCOL (and per signal) picks
 * `http/protobuf` (the default) or `http/json`; OTEL_METRIC_EXPORT_INTERVAL
 * how often metrics go (60 s).
 *
 * Ratchet's providers are its own, not registered globally: inside an
 * application they neither take over nor depend on the application's.
 *
 * A delivery's trace: `ratchet.webhook` (decision, operation), its child
 * `ratchet.write` (the conditional write; its traceparent kept with the
 * effect it makes), and per sink `ratchet.effect`, a child of that write in
 * whatever process or instance delivers it.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import {
  type Attributes,
  defaultTextMapGetter,
  defaultTextMapSetter,
  type Meter,
  type ObservableGauge,
  ROOT_CONTEXT,
  type Span,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPMetricExporter as JsonMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { OTLPMetricExporter as ProtobufMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { GAUGES, type GaugeName, type MetricsSource, readGauges } from '../../app/gauges.ts';
import {
  EFFECT_LAG_BUCKETS,
  METRIC,
  openTelemetrySettings,
  pollLabels,
  type StepSpan,
  type Telemetry,
  WEBHOOK_SECONDS_BUCKETS,
} from '../../app/telemetry.ts';

export interface OpenTelemetry {
  telemetry: Telemetry;
  /** The database's gauges, observed at each export from `source`. */
  observe(source: MetricsSource): void;
  shutdown(): Promise<void>;
}

/**
 * `metrics: false` for a process that only traces (SQLite's effects process: the runtime counts its deliveries, so
 * they are exported once).
 */
export function startOpenTelemetry(
  logger: Logger,
  { env = process.env, metrics = true }: { env?: Record<string, string | undefined>; metrics?: boolean } = {},
): OpenTelemetry {
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'ratchet' }))
    .merge(detectResources({ detectors: [envDetector] }));
  const settings = openTelemetrySettings(env);
  const { intervalMs } = settings;
  const traceExporter = settings.traces === 'http/json' ? new JsonTraceExporter() : new ProtobufTraceExporter();
  const metricExporter = settings.metrics === 'http/json' ? new JsonMetricExporter() : new ProtobufMetricExporter();
  const tracerProvider = new TracerProvider({ resource, spanProcessors: [new BatchSpanProcessor({ exporter: traceExporter })] });
  const meterProvider = new MeterProvider({
    resource,
    readers: metrics
      ? [
          new PeriodicExportingMetricReader({
            exporter: metricExporter,
            exportIntervalMillis: intervalMs,
            exportTimeoutMillis: Math.min(30_000, intervalMs),
          }),
        ]
      : [],
  });
  const tracer = tracerProvider.getTracer('ratchet');
  const meter = meterProvider.getMeter('ratchet');
  const deliveries = meter.createCounter(METRIC.deliveries, { description: 'Webhook deliveries answered, by decision and reason.' });
  const webhookSeconds = meter.createHistogram(METRIC.webhookSeconds, {
    description: 'Seconds from a webhook’s receipt to its answer.',
    unit: 's',
    advice: { explicitBucketBoundaries: WEBHOOK_SECONDS_BUCKETS },
  });
  const effectLag = meter.createHistogram(METRIC.effectLag, {
    description: 'Seconds from a change’s commit to its acceptance by the sink.',
    unit: 's',
    advice: { explicitBucketBoundaries: EFFECT_LAG_BUCKETS },
  });
  const polls = meter.createCounter(METRIC.polls, {
    description: "Reconcile polls of each provider's jobs, by provider, kind and outcome.",
  });
  const propagator = new W3CTraceContextPropagator();

  const step = (span: Span): StepSpan & { span: Span } => ({
    span,
    set: (attributes) => span.setAttributes(attributes),
    end: (error) => {
      if (error !== undefined) {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      }
      span.end();
    },
    traceparent: () => {
      const carrier: Record<string, string> = {};
      propagator.inject(trace.setSpan(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
      return carrier.traceparent;
    },
  });

  const telemetry: Telemetry = {
    webhook: ({ decision, reason }, seconds) => {
      deliveries.add(1, { decision, reason });
      webhookSeconds.record(seconds);
    },
    effect: (sink, lagSeconds) => effectLag.record(lagSeconds, { sink }),
    poll: (kind, outcome) => polls.add(1, pollLabels(kind, outcome)),
    span: (name, attributes, parent) => {
      const context =
        typeof parent === 'string'
          ? propagator.extract(ROOT_CONTEXT, { traceparent: parent }, defaultTextMapGetter)
          : parent && 'span' in parent
            ? trace.setSpan(ROOT_CONTEXT, (parent as ReturnType<typeof step>).span)
            : ROOT_CONTEXT;
      return step(tracer.startSpan(name, { attributes: attributes as Attributes }, context));
    },
  };
  if (metrics)
    logger.info('OpenTelemetry on: metrics and traces exported over OTLP', {
      traces: settings.traces,
      metrics: settings.metrics,
      metricsEveryMs: intervalMs,
    });
  return {
    telemetry,
    observe: (source) => observeGauges(meter, source, logger),
    shutdown: async () => {
      await Promise.allSettled([tracerProvider.shutdown(), meterProvider.shutdown()]);
    },
  };
}

/** The database's gauges, read once per export, as `/metrics` reads them per scrape. */
function observeGauges(meter: Meter, source: MetricsSource, logger: Logger): void {
  const gauges = Object.fromEntries(
    Object.entries(GAUGES).map(([name, description]) => [name, meter.createObservableGauge(name, { description })]),
  ) as Record<GaugeName, ObservableGauge>;
  meter.addBatchObservableCallback(async (result) => {
    try {
      for (const { name, labels, value } of await readGauges(source)) result.observe(gauges[name], value, labels);
    } catch (error) {
      logger.warn('OpenTelemetry: the database gauges could not be read for this export', { detail: (error as Error).message });
    }
  }, Object.values(gauges));
}
