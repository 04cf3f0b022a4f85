/**
 * The SQLite engine's derived-work process as `ratchet start` and
 * `createRatchet` fork it (engines/sqlite's derived-child.ts): each effect's
 * delivery traced by the OpenTelemetry SDK where an OTLP endpoint is set
 * (its lag is counted by the parent, which serves /metrics).
 */
import { otlpRequested } from '../app/telemetry.ts';
import { serveDerivedWork } from '../engines/sqlite/index.ts';

serveDerivedWork(async (logger) =>
  otlpRequested() ? (await import('./telemetry/otel.ts')).startOpenTelemetry(logger, { metrics: false }) : undefined,
);
