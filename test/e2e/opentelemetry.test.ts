/**
 * OpenTelemetry over OTLP to a collector in the test (plain HTTP on
 * 127.0.0.1): with OTEL_EXPORTER_OTLP_ENDPOINT set, a delivery's spans form
 * one trace, from the webhook through its write to the effect's delivery,
 * across the process that delivers it (SQLite's effects process) or the
 * other instance (PostgreSQL); the metrics go too, with `/metrics`' names.
 * `http/json` is read here; `http/protobuf` (the default) is checked by its
 * content type and the names it carries.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { Collector, type JsonSpan } from '../support/otlp-collector.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const attribute = (span: JsonSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value?.stringValue ?? (value?.intValue === undefined ? undefined : Number(value.intValue));
};

/** The spans of the delivery about `name`: its webhook, its write and its effect's, each once, in one trace. */
async function traceOf(collector: Collector, name: string) {
  let found: Record<string, JsonSpan> = {};
  await eventually(
    () => {
      const spans = collector.spans().filter((span) => attribute(span, 'ratchet.operation.name') === name);
      found = Object.fromEntries(spans.map((span) => [span.name, span]));
      return ['ratchet.webhook', 'ratchet.write', 'ratchet.effect'].every((step) => found[step]);
    },
    20_000,
    `the spans of ${name}`,
  );
  return found as Record<'ratchet.webhook' | 'ratchet.write' | 'ratchet.effect', JsonSpan>;
}

const OTEL = { OTEL_METRIC_EXPORT_INTERVAL: '300', OTEL_BSP_SCHEDULE_DELAY: '100', OTEL_SERVICE_NAME: 'ratchet-under-test' };

describe('OpenTelemetry on one machine (SQLite, its effects in a process of their own)', () => {
  const inbound = newSecret();
  const outbound = newSecret();
  const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-otel-'));
  let receiver: Receiver;
  let collector: Collector;
  let ratchet: RatchetProcess;

  beforeAll(async () => {
    receiver = await new Receiver(outbound).start();
    collector = await new Collector().start();
    ratchet = await startRatchet({
      ...OTEL,
      DATA_DIR: dataDir,
      WEBHOOK_SIGNING_SECRETS: inbound,
      EFFECTS_WEBHOOK_URL: receiver.url,
      EFFECTS_SIGNING_SECRET: outbound,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    });
  }, 60_000);
  afterAll(async () => {
    await ratchet?.stop();
    await receiver?.stop();
    await collector?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('exports one trace per delivery: the webhook, its write, and the effect delivered by the other process, with the operation’s attributes', async () => {
    const name = 'batches/otel_sqlite';
    const delivery = signedDelivery(inbound, envelope('batch.succeeded', { id: 'otel_sqlite' }));
    expect((await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body: delivery.body, headers: delivery.headers })).status).toBe(
      200,
    );
    const spans = await traceOf(collector, name);
    const { 'ratchet.webhook': webhook, 'ratchet.write': write, 'ratchet.effect': effect } = spans;
    expect(new Set([webhook.traceId, write.traceId, effect.traceId]).size).toBe(1);
    expect(write.parentSpanId).toBe(webhook.spanId);
    expect(effect.parentSpanId).toBe(write.spanId);
    expect(webhook.parentSpanId ?? '').toBe('');
    expect(attribute(webhook, 'ratchet.decision')).toBe('applied');
    expect(attribute(webhook, 'ratchet.operation.kind')).toBe('batch');
    expect(attribute(webhook, 'ratchet.operation.version')).toBe(1);
    expect(attribute(effect, 'ratchet.sink')).toBe('webhook');
    expect(attribute(effect, 'ratchet.operation.version')).toBe(1);
    expect(attribute(effect, 'ratchet.operation.state')).toBe('SUCCEEDED');
    const resource = JSON.parse(collector.exports.find((one) => one.path === '/v1/traces')?.body.toString() ?? '{}').resourceSpans[0]
      .resource;
    expect(resource.attributes).toEqual(expect.arrayContaining([{ key: 'service.name', value: { stringValue: 'ratchet-under-test' } }]));
  });

  it('exports the metrics under the names /metrics serves', async () => {
    await eventually(
      () => {
        const names = collector.metricNames();
        return [
          'ratchet_webhook_deliveries_total',
          'ratchet_webhook_duration_seconds',
          'ratchet_effect_lag_seconds',
          'ratchet_operations',
        ].every((name) => names.has(name));
      },
      10_000,
      'the metrics exported',
    );
    const names = collector.metricNames();
    for (const name of ['ratchet_oldest_open_operation_age_seconds', 'ratchet_overdue_operations', 'ratchet_effects_pending'])
      expect(names.has(name), name).toBe(true);
  });
});

describe('OpenTelemetry on two instances sharing PostgreSQL', () => {
  const inbound = newSecret();
  const outbound = newSecret();
  const schema = `rt_otel_${Date.now().toString(36)}`;
  let receiver: Receiver;
  let collector: Collector;
  const instances: RatchetProcess[] = [];

  beforeAll(async () => {
    receiver = await new Receiver(outbound).start();
    collector = await new Collector().start();
    const start = (protocol: string) =>
      startRatchet({
        ...OTEL,
        DATABASE_URL: inject('postgresUrl'),
        DATABASE_SCHEMA: schema,
        WEBHOOK_SIGNING_SECRETS: inbound,
        EFFECTS_WEBHOOK_URL: receiver.url,
        EFFECTS_SIGNING_SECRET: outbound,
        OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
        OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      });
    instances.push(await start('http/json'));
    instances.push(await start('http/json'));
  }, 90_000);
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.stop()));
    await receiver?.stop();
    await collector?.stop();
  });

  it('joins each effect to its webhook’s trace, whichever instance delivered it', async () => {
    const names = Array.from({ length: 6 }, (_, i) => `otel_pg_${i}`);
    for (const [i, id] of names.entries()) {
      const delivery = signedDelivery(inbound, envelope('batch.succeeded', { id }));
      const instance = instances[i % 2] as RatchetProcess;
      expect(
        (await fetch(`${instance.url}/webhooks/gemini`, { method: 'POST', body: delivery.body, headers: delivery.headers })).status,
      ).toBe(200);
    }
    for (const id of names) {
      const { 'ratchet.webhook': webhook, 'ratchet.write': write, 'ratchet.effect': effect } = await traceOf(collector, `batches/${id}`);
      expect(effect.traceId).toBe(webhook.traceId);
      expect(effect.parentSpanId).toBe(write.spanId);
    }
  });
});

describe('OpenTelemetry over http/protobuf (the default protocol)', () => {
  let collector: Collector;
  let ratchet: RatchetProcess;
  const inbound = newSecret();

  beforeAll(async () => {
    collector = await new Collector().start();
    ratchet = await startRatchet({
      ...OTEL,
      DATA_DIR: ':memory:',
      WEBHOOK_SIGNING_SECRETS: inbound,
      OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
    });
  }, 60_000);
  afterAll(async () => {
    await ratchet?.stop();
    await collector?.stop();
  });

  it('sends traces and metrics as protobuf to /v1/traces and /v1/metrics', async () => {
    const delivery = signedDelivery(inbound, envelope('batch.succeeded', { id: 'otel_protobuf' }));
    expect((await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body: delivery.body, headers: delivery.headers })).status).toBe(
      200,
    );
    const carrying = (path: string, text: string) =>
      collector.exports.some((one) => one.path === path && one.contentType === 'application/x-protobuf' && one.body.includes(text));
    await eventually(
      () => carrying('/v1/traces', 'batches/otel_protobuf') && carrying('/v1/metrics', 'ratchet_webhook_deliveries_total'),
      10_000,
      'protobuf exports',
    );
    expect(carrying('/v1/traces', 'ratchet.write')).toBe(true);
  });
});
