/**
 * `GET /metrics` after real traffic, on one machine (SQLite, its effects in
 * their own process) and on two `ratchet start` instances sharing one
 * PostgreSQL database: every name present, the counters equal to what was
 * sent (applied, duplicates, a terminal conflict, a bad signature), the
 * histograms counting each delivery and each effect, the database's gauges
 * (operations, the oldest open job, effects waiting and retrying) as the
 * data stands, and 401 without the API token.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const NAMES = [
  'ratchet_webhook_deliveries_total',
  'ratchet_webhook_duration_seconds',
  'ratchet_operations',
  'ratchet_oldest_open_operation_age_seconds',
  'ratchet_overdue_operations',
  'ratchet_effects_pending',
  'ratchet_effects_retrying',
  'ratchet_effects_dead_lettered',
  'ratchet_effect_lag_seconds',
  'ratchet_reconcile_polls_total',
];

/** The value of one sample, `name{labels}` with exactly these labels; undefined when absent (never 0: a `toBe(0)` must fail on a missing series). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels)
    .map(([key, value]) => `${key}="${value}"`)
    .sort()
    .join(',');
  for (const line of text.split('\n')) {
    const match = line.match(/^([a-z_]+)(?:\{(.*)\})? (\S+)$/);
    if (!match || match[1] !== name) continue;
    const got = (match[2] ?? '')
      .split(/,(?=[a-z_]+=")/)
      .filter(Boolean)
      .sort()
      .join(',');
    if (got === wanted) return Number(match[3]);
  }
  return undefined;
}

const metricsOf = async (instance: RatchetProcess) => {
  const answer = await instance.api('/metrics');
  expect(answer.status).toBe(200);
  expect(answer.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return answer.text();
};

/** Sends `count` new batches' `batch.succeeded`, then each again (same webhook-id: duplicates), one conflicting end and one bad signature, spread over `front`. */
async function traffic(front: RatchetProcess[], secret: string, prefix: string, count: number) {
  const deliveries = Array.from({ length: count }, (_, i) => signedDelivery(secret, envelope('batch.succeeded', { id: `${prefix}_${i}` })));
  const post = (i: number, delivery: { body: string; headers: Record<string, string> }) =>
    fetch(`${(front[i % front.length] as RatchetProcess).url}/webhooks/gemini`, {
      method: 'POST',
      body: delivery.body,
      headers: delivery.headers,
    });
  for (const [i, delivery] of deliveries.entries()) expect((await post(i, delivery)).status).toBe(200);
  for (const [i, delivery] of deliveries.entries()) expect((await post(i + 1, delivery)).status).toBe(200);
  expect((await post(0, signedDelivery(secret, envelope('batch.failed', { id: `${prefix}_0` })))).status).toBe(200);
  expect((await post(1, signedDelivery(newSecret(), envelope('batch.succeeded', { id: `${prefix}_x` })))).status).toBe(401);
}

describe('GET /metrics on one machine (SQLite)', () => {
  const inbound = newSecret();
  const outbound = newSecret();
  const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-metrics-'));
  let receiver: Receiver;
  let ratchet: RatchetProcess;

  beforeAll(async () => {
    receiver = await new Receiver(outbound).start();
    ratchet = await startRatchet({
      DATA_DIR: dataDir,
      WEBHOOK_SIGNING_SECRETS: inbound,
      EFFECTS_WEBHOOK_URL: receiver.url,
      EFFECTS_SIGNING_SECRET: outbound,
      EFFECTS_RETRY_BASE_MS: '100',
      EFFECTS_RETRY_MAX_MS: '300',
    });
  }, 60_000);
  afterAll(async () => {
    await ratchet?.stop();
    await receiver?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 401 without the token, and serves every name with it', async () => {
    expect((await fetch(`${ratchet.url}/metrics`)).status).toBe(401);
    expect((await fetch(`${ratchet.url}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const text = await metricsOf(ratchet);
    for (const name of NAMES) expect(text, name).toContain(`# TYPE ${name} `);
    expect(text).toContain('# TYPE ratchet_webhook_duration_seconds histogram');
    expect(text).toContain('# TYPE ratchet_effect_lag_seconds histogram');
    expect(sample(text, 'ratchet_oldest_open_operation_age_seconds', { provider: 'gemini', kind: 'batch' })).toBe(0);
  });

  it('counts what was sent, each delivery timed, each effect’s lag, the operations and the effects waiting', async () => {
    const count = 8;
    await traffic([ratchet], inbound, 'batches/metrics_sqlite', count);
    await eventually(() => receiver.accepted.length >= count, 30_000, 'every effect delivered');
    let text = '';
    await eventually(
      async () => {
        text = await metricsOf(ratchet);
        return sample(text, 'ratchet_effect_lag_seconds_count', { sink: 'webhook' }) === count;
      },
      10_000,
      'each effect counted by the runtime',
    );
    expect(sample(text, 'ratchet_webhook_deliveries_total', { decision: 'applied', reason: '' })).toBe(count);
    expect(sample(text, 'ratchet_webhook_deliveries_total', { decision: 'discarded', reason: 'duplicate' })).toBe(count);
    expect(sample(text, 'ratchet_webhook_deliveries_total', { decision: 'discarded', reason: 'terminal-conflict' })).toBe(1);
    expect(sample(text, 'ratchet_webhook_deliveries_total', { decision: 'unauthenticated', reason: 'invalid-signature' })).toBe(1);
    expect(sample(text, 'ratchet_webhook_duration_seconds_count')).toBe(2 * count + 2);
    expect(sample(text, 'ratchet_webhook_duration_seconds_bucket', { le: '+Inf' })).toBe(2 * count + 2);
    expect(sample(text, 'ratchet_effect_lag_seconds_bucket', { sink: 'webhook', le: '+Inf' })).toBe(count);
    expect(sample(text, 'ratchet_operations', { provider: 'gemini', kind: 'batch', state: 'SUCCEEDED' })).toBe(count);
    expect(sample(text, 'ratchet_effects_pending', { sink: 'webhook' })).toBe(0);
    expect(sample(text, 'ratchet_effects_dead_lettered', { sink: 'webhook' })).toBe(0);
    // No label holds an operation's name.
    expect(text).not.toMatch(/metrics_sqlite/);
  });

  it('shows an open job’s age by provider and kind, and effects waiting and retrying while the receiver refuses them', async () => {
    for (const name of ['batches/metrics_open', 'openai/batches/batch_metrics_open']) {
      const tracked = await ratchet.api('/operations', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      expect(tracked.status).toBeLessThan(300);
    }
    receiver.mode = 'fail';
    await traffic([ratchet], inbound, 'batches/metrics_refused', 1);
    let text = '';
    await eventually(
      async () => {
        text = await metricsOf(ratchet);
        return sample(text, 'ratchet_effects_retrying', { sink: 'webhook' }) === 1;
      },
      15_000,
      'the refused effect retrying',
    );
    expect(sample(text, 'ratchet_effects_pending', { sink: 'webhook' })).toBe(1);
    expect(sample(text, 'ratchet_operations', { provider: 'gemini', kind: 'batch', state: 'tracked' })).toBe(1);
    expect(sample(text, 'ratchet_operations', { provider: 'openai', kind: 'openai-batch', state: 'tracked' })).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    text = await metricsOf(ratchet);
    expect(sample(text, 'ratchet_oldest_open_operation_age_seconds', { provider: 'gemini', kind: 'batch' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'ratchet_oldest_open_operation_age_seconds', { provider: 'openai', kind: 'openai-batch' })).toBeGreaterThanOrEqual(
      1,
    );
    expect(sample(text, 'ratchet_oldest_open_operation_age_seconds', { provider: 'anthropic', kind: 'anthropic-batch' })).toBe(0);
    receiver.mode = 'ok';
    await eventually(
      async () => sample(await metricsOf(ratchet), 'ratchet_effects_pending', { sink: 'webhook' }) === 0,
      15_000,
      'the effect delivered once the receiver takes it',
    );
  });
});

describe('GET /metrics on two instances sharing PostgreSQL', () => {
  const inbound = newSecret();
  const outbound = newSecret();
  const schema = `rt_metrics_${Date.now().toString(36)}`;
  let receiver: Receiver;
  const instances: RatchetProcess[] = [];

  beforeAll(async () => {
    receiver = await new Receiver(outbound).start();
    const start = () =>
      startRatchet({
        DATABASE_URL: inject('postgresUrl'),
        DATABASE_SCHEMA: schema,
        WEBHOOK_SIGNING_SECRETS: inbound,
        EFFECTS_WEBHOOK_URL: receiver.url,
        EFFECTS_SIGNING_SECRET: outbound,
      });
    instances.push(await start());
    instances.push(await start());
  }, 90_000);
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.stop()));
    await receiver?.stop();
  });

  it('counts per instance (their sum what was sent), gauges of the whole database (the same from each), 401 without the token', async () => {
    const count = 10;
    await traffic(instances, inbound, 'batches/metrics_pg', count);
    await eventually(() => new Set(receiver.accepted.map((d) => d.id)).size >= count, 30_000, 'every effect delivered');
    const texts: string[] = [];
    await eventually(
      async () => {
        texts.splice(0, texts.length, ...(await Promise.all(instances.map(metricsOf))));
        // An instance that delivered none has no lag series for the sink: it adds nothing.
        const lag = texts.reduce((sum, text) => sum + (sample(text, 'ratchet_effect_lag_seconds_count', { sink: 'webhook' }) ?? 0), 0);
        return lag >= count && texts.every((text) => sample(text, 'ratchet_effects_pending', { sink: 'webhook' }) === 0);
      },
      15_000,
      'each effect counted where it was delivered',
    );
    // A counter one instance never counted (no such delivery reached it) is absent from its page: it adds nothing.
    const sum = (name: string, labels: Record<string, string> = {}) =>
      texts.reduce((total, text) => total + (sample(text, name, labels) ?? 0), 0);
    expect(sum('ratchet_webhook_deliveries_total', { decision: 'applied', reason: '' })).toBe(count);
    expect(sum('ratchet_webhook_deliveries_total', { decision: 'discarded', reason: 'duplicate' })).toBe(count);
    expect(sum('ratchet_webhook_deliveries_total', { decision: 'discarded', reason: 'terminal-conflict' })).toBe(1);
    expect(sum('ratchet_webhook_deliveries_total', { decision: 'unauthenticated', reason: 'invalid-signature' })).toBe(1);
    expect(sum('ratchet_webhook_duration_seconds_count')).toBe(2 * count + 2);
    // Each instance answered some of them: the counters are its own.
    for (const text of texts) expect(sample(text, 'ratchet_webhook_duration_seconds_count')).toBeGreaterThan(0);
    // An effect redelivered after a lost settle counts again, so at least one per change.
    expect(sum('ratchet_effect_lag_seconds_count', { sink: 'webhook' })).toBeGreaterThanOrEqual(count);
    for (const text of texts) {
      for (const name of NAMES) expect(text, name).toContain(`# TYPE ${name} `);
      expect(sample(text, 'ratchet_operations', { provider: 'gemini', kind: 'batch', state: 'SUCCEEDED' })).toBe(count);
      expect(sample(text, 'ratchet_effects_dead_lettered', { sink: 'webhook' })).toBe(0);
    }
    for (const instance of instances) expect((await fetch(`${instance.url}/metrics`)).status).toBe(401);
  });
});
