import { beforeEach, describe, expect, it } from 'vitest';
import { createApp } from '../../app/http/app.ts';
import { NotConfiguredError, WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { type StoreHealth, StoreRejectedError } from '../../app/ports.ts';
import type { Telemetry, WebhookOutcome } from '../../app/telemetry.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { silentLogger } from '../support/silent-logger.ts';

const secret = newSecret();
let store: MemoryStore;
let app: ReturnType<typeof createApp>;
let outcomes: WebhookOutcome[];
/** Each delivery's decision, as `ratchet_webhook_deliveries_total` counts it (on AWS the alarms read it: lib/ratchet-alarms.ts). */
let telemetry: Telemetry;

beforeEach(() => {
  store = new MemoryStore();
  outcomes = [];
  telemetry = { webhook: (outcome) => void outcomes.push(outcome), effect: () => {}, poll: () => {} };
  app = createApp({
    store,
    receipts: store,
    unprocessable: store,
    verifier: new WebhookSignatureVerifier(async () => [secret]),
    logger: silentLogger,
    telemetry,
  });
});

const counted = () => outcomes;

async function deliver(payload: unknown, options: { id?: string; timestamp?: number; secret?: string } = {}) {
  const { body, headers } = signedDelivery(options.secret ?? secret, payload, options);
  const response = await app.request('/webhooks/gemini', { method: 'POST', body, headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('POST /webhooks/gemini', () => {
  it('applies a signed delivery and answers with the stored operation', async () => {
    const answer = await deliver(envelope('batch.succeeded', { id: 'batch_9' }));
    expect(answer).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name: 'batches/9', state: 'SUCCEEDED', version: 1 } },
    });
    expect(store.records.get('batches/9')?.state).toBe('SUCCEEDED');
  });

  it('answers 200 without a change for a redelivery, a stale event and a terminal conflict', async () => {
    await deliver(envelope('batch.succeeded', { id: 'batches/9' }, '2026-11-30T10:00:00Z'), { id: 'msg_a' });
    expect(await deliver(envelope('batch.succeeded', { id: 'batches/9' }, '2026-11-30T10:00:00Z'), { id: 'msg_a' })).toMatchObject({
      status: 200,
      body: { applied: false, reason: 'duplicate' },
    });
    expect(await deliver(envelope('batch.succeeded', { id: 'batches/9' }, '2026-11-30T09:00:00Z'))).toMatchObject({
      status: 200,
      body: { applied: false, reason: 'stale-or-equal-update-time' },
    });
    expect(await deliver(envelope('batch.failed', { id: 'batches/9' }, '2026-11-30T11:00:00Z'))).toMatchObject({
      status: 200,
      body: { applied: false, reason: 'terminal-conflict', operation: { state: 'SUCCEEDED', version: 1 } },
    });
    expect(store.writes).toBe(1);
  });

  it('acknowledges unknown event types, changes no operation, and notes the delivery for npm run connect', async () => {
    const now = Date.now();
    expect(await deliver({ type: 'webhook.ping' }, { id: 'msg_ping1' })).toEqual({
      status: 200,
      body: { applied: false, reason: 'unknown-event-type' },
    });
    expect(store.writes).toBe(0);
    expect(store.unmapped).toEqual([{ type: 'webhook.ping', webhookId: 'msg_ping1', receivedAt: expect.any(String) }]);
    expect(Date.parse(store.unmapped[0]?.receivedAt ?? '')).toBeGreaterThanOrEqual(now - 1000);
  });

  it('answers an unknown event type 200 even when its note cannot be written', async () => {
    store.failReceipts = true;
    expect((await deliver({ type: 'webhook.ping' })).status).toBe(200);
  });

  it('notes nothing for a delivery whose signature is wrong', async () => {
    expect((await deliver({ type: 'webhook.ping' }, { secret: newSecret() })).status).toBe(401);
    expect(store.unmapped).toEqual([]);
  });

  // An authentic delivery is never refused: Gemini would retry it for a day, then switch the webhook off.
  it.each([
    ['a body that is not JSON', '{"type":', 'not-json', null],
    ['a known type without data.id', envelope('batch.succeeded', {}), 'malformed-event', 'batch.succeeded'],
    ['an unparseable time', envelope('batch.succeeded', { id: 'batches/1' }, 'Tuesday'), 'invalid-time', 'batch.succeeded'],
    ['a name with a non-ASCII letter', envelope('batch.succeeded', { id: 'batches/café' }), 'invalid-name', 'batch.succeeded'],
    [
      'a name with a .. segment',
      envelope('interaction.completed', { id: 'interactions/../files/x' }),
      'invalid-name',
      'interaction.completed',
    ],
  ])('answers 200 unprocessable for %s: nothing stored, kept with its reason, counted', async (_, payload, reason, type) => {
    const answer = await deliver(payload, { id: `msg_${reason}` });
    expect(answer).toEqual({ status: 200, body: { applied: false, reason: 'unprocessable', detail: expect.any(String) } });
    expect(store.writes).toBe(0);
    const kept = store.unprocessable.get(`msg_${reason}`);
    expect(kept).toMatchObject({ outcome: 'unprocessable', webhookId: `msg_${reason}`, reason, type, scheme: 'hmac' });
    expect(kept?.body).toBe(typeof payload === 'string' ? payload : JSON.stringify(payload));
    expect(counted()).toContainEqual({ decision: 'unprocessable', reason });
    const listed = await app.request('/decisions?outcome=unprocessable');
    expect(await listed.json()).toEqual({ decisions: [kept] });
  });

  it('keeps the first 4 KiB of an unprocessable body, and answers 503 while it cannot be kept (Gemini retries)', async () => {
    const long = `{"type":"batch.succeeded","data":${'x'.repeat(10_000)}`;
    expect((await deliver(long, { id: 'msg_long' })).status).toBe(200);
    expect(store.unprocessable.get('msg_long')?.body).toBe(long.slice(0, 4096));
    store.failReads = true;
    expect(await deliver('{"type":', { id: 'msg_later' })).toMatchObject({ status: 503, body: { error: 'not-recorded' } });
  });

  it('reads any envelope version, and an id of another family by its own shape (Omni video is an interaction)', async () => {
    expect(await deliver({ ...envelope('batch.succeeded', { id: 'batches/v2' }), version: 'v2' })).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name: 'batches/v2', kind: 'batch' } },
    });
    expect(await deliver(envelope('video.generated', { id: 'interactions/v1_omni1', video_uri: 'files/clip' }))).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name: 'interactions/v1_omni1', kind: 'interaction', state: 'SUCCEEDED' } },
    });
    expect(await deliver(envelope('video.generated', { id: 'v1_omni2' }))).toMatchObject({
      body: { operation: { name: 'interactions/v1_omni2', kind: 'interaction' } },
    });
    expect(await deliver(envelope('batch.failed', { id: 'interaction_x9' }))).toMatchObject({
      body: { operation: { name: 'interactions/x9', kind: 'interaction', state: 'FAILED' } },
    });
  });

  it('refuses GET /decisions with another outcome or a bad limit', async () => {
    expect((await app.request('/decisions?outcome=applied')).status).toBe(400);
    expect((await app.request('/decisions?limit=0')).status).toBe(400);
    expect((await app.request('/decisions')).status).toBe(200);
  });

  it('answers 401 for a wrong secret and for a stale timestamp, before reading the body', async () => {
    expect((await deliver(envelope('batch.succeeded', { id: 'batches/1' }), { secret: newSecret() })).status).toBe(401);
    const stale = await deliver(envelope('batch.succeeded', { id: 'batches/1' }), { timestamp: Math.floor(Date.now() / 1000) - 600 });
    expect(stale).toMatchObject({ status: 401, body: { error: 'invalid-signature' } });
    expect((await deliver('not even json', { secret: newSecret() })).status).toBe(401);
    expect(store.writes).toBe(0);
  });

  it('answers 413 above 256 KiB and accepts exactly 256 KiB', async () => {
    const base = JSON.stringify(envelope('batch.succeeded', { id: 'batches/big', pad: '' }));
    const pad = (bytes: number) => base.replace('"pad":""', `"pad":"${'x'.repeat(bytes - base.length)}"`);
    expect((await deliver(pad(256 * 1024))).status).toBe(200);
    expect((await deliver(pad(256 * 1024 + 1))).status).toBe(413);
  });

  it('answers 503 when the event could not be recorded', async () => {
    store.failReads = true;
    expect(await deliver(envelope('batch.succeeded', { id: 'batches/1' }))).toMatchObject({ status: 503, body: { error: 'not-recorded' } });
    expect(counted()).toEqual([{ decision: 'not-recorded', reason: 'not-recorded' }]);
  });
});

describe('operations API', () => {
  const track = (body: unknown) =>
    app.request('/operations', { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });

  it('tracks a new operation with 201, a known one with 200', async () => {
    const created = await track({ name: 'batch_5' });
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ name: 'batches/5', state: null, version: 1 });
    const again = await track({ name: 'batches/5' });
    expect(again.status).toBe(200);
    expect(store.writes).toBe(1);
  });

  it('keeps the metadata a track brings to a job a webhook or discovery recorded first (its create and track raced them), once', async () => {
    await deliver(envelope('batch.succeeded', { id: 'batches/raced' }));
    const tracked = await track({ name: 'batches/raced', metadata: { order: 'A-17' } });
    expect(tracked.status).toBe(200);
    expect(await tracked.json()).toMatchObject({ state: 'SUCCEEDED', version: 2, source: 'track', userMetadata: { order: 'A-17' } });
    expect(await store.get('batches/raced')).toMatchObject({ version: 2, userMetadata: { order: 'A-17' }, stateChanged: false });
    // What the record has stays: a second track's metadata writes nothing.
    const again = await track({ name: 'batches/raced', metadata: { order: 'B-2' } });
    expect(await again.json()).toMatchObject({ version: 2, userMetadata: { order: 'A-17' } });
  });

  it('rejects a body without a valid name with 400', async () => {
    expect((await track({})).status).toBe(400);
    expect((await track({ name: 'two words' })).status).toBe(400);
    expect((await app.request('/operations', { method: 'POST', body: '{', headers: { 'content-type': 'application/json' } })).status).toBe(
      400,
    );
  });

  it('reads names containing slashes, raw or percent-encoded; 404 for unknown', async () => {
    await deliver(envelope('video.generated', { id: 'models/veo-3/operations/v1' }));
    for (const path of ['/operations/models/veo-3/operations/v1', '/operations/models%2Fveo-3%2Foperations%2Fv1']) {
      const response = await app.request(path);
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({
        name: 'models/veo-3/operations/v1',
        state: 'SUCCEEDED',
        providerState: 'video.generated',
        version: 1,
      });
    }
    expect((await app.request('/operations/batches/unknown')).status).toBe(404);
  });

  it('answers healthz and unknown routes', async () => {
    expect((await app.request('/healthz')).status).toBe(200);
    expect((await app.request('/nope')).status).toBe(404);
  });
});

describe('store errors, classified once', () => {
  it('a refusal is 200 unprocessable (Gemini stops retrying), kept, logged and counted; an outage is 503', async () => {
    store.beforeWrite = () => {
      throw new StoreRejectedError('DynamoDB refused the record: Number overflow');
    };
    const refused = await deliver(envelope('batch.failed', { id: 'batches/r1' }), { id: 'msg_r1' });
    expect(refused).toMatchObject({ status: 200, body: { reason: 'unprocessable', detail: expect.stringContaining('Number overflow') } });
    expect(store.unprocessable.get('msg_r1')).toMatchObject({ reason: 'unstorable', type: 'batch.failed' });
    expect(counted()).toContainEqual({ decision: 'unprocessable', reason: 'unstorable' });
    store.beforeWrite = () => {
      throw new Error('socket hang up');
    };
    expect(await deliver(envelope('batch.failed', { id: 'batches/r1' }))).toMatchObject({ status: 503, body: { error: 'not-recorded' } });
    expect(store.records.size).toBe(0);
  });

  it('a provider number DynamoDB could not hold is recorded as its exact text', async () => {
    const body = JSON.stringify(envelope('batch.failed', { id: 'batches/n1', error: { code: 0, message: 'm' } })).replace(
      '"code":0',
      '"code":9007199254740993',
    );
    const response = await app.request('/webhooks/gemini', { method: 'POST', ...signedDelivery(secret, body) });
    expect(response.status).toBe(200);
    expect(store.records.get('batches/n1')?.result).toEqual({ error: { code: '9007199254740993', message: 'm' } });
  });
});

describe('/healthz', () => {
  it('answers 503 degraded while the store cannot be reached', async () => {
    let store: StoreHealth = { unavailable: 'the data file does not take a write (SQLITE_FULL)' };
    const withHealth = createApp({
      store: new MemoryStore(),
      verifier: new WebhookSignatureVerifier(async () => [secret]),
      logger: silentLogger,
      health: async () => store,
    });
    const down = await withHealth.request('/healthz');
    expect({ status: down.status, body: await down.json() }).toEqual({
      status: 503,
      body: { status: 'degraded', store: 'unavailable', reason: 'the data file does not take a write (SQLITE_FULL)' },
    });
    expect(down.headers.get('retry-after')).toBe('1');
    store = 'ok';
    expect((await withHealth.request('/healthz')).status).toBe(200);
  });
});

describe('POST /operations refuses what a web page could send', () => {
  const post = (body: string | ReadableStream<Uint8Array>, headers: Record<string, string>) =>
    app.request('http://127.0.0.1:3000/operations', { method: 'POST', body, headers, duplex: 'half' } as RequestInit);
  const json = { 'content-type': 'application/json' };

  it('a cross-site "simple" request (text/plain) is 415; any foreign Origin is 403; its own origin and no origin are fine', async () => {
    const body = JSON.stringify({ name: 'batches/web' });
    expect((await post(body, { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post(body, { 'content-type': 'text/plain', origin: 'https://evil.example' })).status).toBe(403);
    expect((await post(body, { ...json, origin: 'https://evil.example' })).status).toBe(403);
    expect((await post(body, { ...json, origin: 'null' })).status).toBe(403);
    expect((await post(body, { ...json, origin: 'http://127.0.0.1:3000' })).status).toBe(201);
    expect((await post(JSON.stringify({ name: 'batches/cli' }), { 'content-type': 'application/json; charset=utf-8' })).status).toBe(201);
    expect([...store.records.keys()]).toEqual(['batches/web', 'batches/cli']);
  });

  it('a body over 4 KiB is 413, chunked or not, and is not read to its end', async () => {
    expect((await post(JSON.stringify({ name: 'batches/x', pad: 'x'.repeat(5000) }), json)).status).toBe(413);
    let pulled = 0;
    const endless = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++;
        controller.enqueue(new Uint8Array(64 * 1024).fill(32));
        if (pulled === 128) controller.close(); // 8 MiB
      },
    });
    const response = await post(endless, json);
    expect(response.status).toBe(413);
    expect(pulled).toBeLessThan(128);
    expect(store.records.size).toBe(0);
  });

  it('GET of a name that is not a resource name is 400, never a read', async () => {
    const response = await app.request('/operations/batches/..%2Ffiles%2Fx');
    expect({ status: response.status, error: ((await response.json()) as { error: string }).error }).toEqual({
      status: 400,
      error: 'malformed-request',
    });
  });
});

describe('safe until configured', () => {
  it('answers 503 not-configured, counted, while no usable signing secret is set: Gemini keeps the delivery for later', async () => {
    const unconfigured = createApp({
      store,
      verifier: new WebhookSignatureVerifier(async () => {
        throw new NotConfiguredError('webhook signing secret not configured (no value)');
      }),
      logger: silentLogger,
      telemetry,
    });
    const response = await unconfigured.request('/webhooks/gemini', {
      method: 'POST',
      ...signedDelivery(secret, envelope('batch.failed', { id: 'batches/nc' })),
    });
    expect({ status: response.status, body: await response.json() }).toEqual({
      status: 503,
      body: { error: 'not-configured', message: 'webhook signing secret not configured (no value); retry later' },
    });
    expect(counted()).toContainEqual({ decision: 'not-configured', reason: 'not-configured' });
    expect(store.records.size).toBe(0);
  });
});
