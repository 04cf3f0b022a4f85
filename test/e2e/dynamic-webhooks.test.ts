/**
 * Dynamic (per-request) webhooks through `npm start`: deliveries signed with
 * locally generated Google-style keys, served by a local key-set server, and a
 * fake Gemini (real SDK) that answers the poll a JWT-signed delivery asks for.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationRecord } from '../../core/reducer.ts';
import { envelope, newSecret, type SignedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import {
  ed25519Delivery,
  ed25519Key,
  jwtDelivery,
  KeyServer,
  publicKeyAsSecret,
  rsaKey,
  unsignedJwtDelivery,
} from '../support/google-keys.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const AUDIENCE = 'https://ratchet.example/webhooks/gemini';
const outbound = newSecret();
const ed = ed25519Key();
const rsa = rsaKey();
let keys: KeyServer;
let gemini: FakeGemini;
let receiver: Receiver;
let ratchet: RatchetProcess;

beforeAll(async () => {
  keys = await new KeyServer(ed, rsa).start();
  gemini = await new FakeGemini('dynamic-key').start();
  receiver = await new Receiver(outbound).start();
  ratchet = await startRatchet({
    DATA_DIR: ':memory:',
    WEBHOOK_SIGNING_SECRETS: newSecret(),
    GEMINI_WEBHOOK_KEYS_URL: keys.url,
    // A failed key fetch is remembered this long (30 s by default; test/e2e/access.test.ts holds the default).
    GEMINI_WEBHOOK_KEYS_RETRY_SECONDS: '1',
    GEMINI_WEBHOOK_AUDIENCE: AUDIENCE,
    GEMINI_API_KEY: gemini.apiKey,
    GEMINI_BASE_URL: gemini.baseUrl,
    // An hour: a poll seen here was asked for by the delivery, not by the schedule.
    RECONCILE_INTERVAL_SECONDS: '3600',
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
  });
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  await gemini?.stop();
  await keys?.stop();
});

async function deliver(signed: SignedDelivery) {
  const response = await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body: signed.body, headers: signed.headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}
const read = async (name: string) => (await (await ratchet.api(`/operations/${name}`)).json()) as OperationRecord;

describe('dynamic webhooks through npm start', () => {
  it('answers 503 while the key set cannot be fetched, and applies the same delivery once it can', async () => {
    const delivery = ed25519Delivery(ed, envelope('batch.succeeded', { id: 'batches/dyn-keys-down' }));
    keys.down = true;
    try {
      const refused = await deliver(delivery);
      expect(refused.status).toBe(503);
      expect(refused.body.error).toBe('keys-unavailable');
    } finally {
      keys.down = false;
    }
    // The failure is remembered for GEMINI_WEBHOOK_KEYS_RETRY_SECONDS: Gemini's retry after it is applied.
    expect((await deliver(delivery)).status).toBe(503);
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    expect(await deliver(delivery)).toMatchObject({ status: 200, body: { applied: true } });
  });

  it('applies v1a deliveries with their user_metadata (carried into the effect); an unknown key or a tampered body is 401', async () => {
    const name = 'batches/dyn-v1a';
    const body = { ...envelope('batch.succeeded', { id: name }), user_metadata: { tenant: 'acme', job: '42' } };
    const delivery = ed25519Delivery(ed, body);
    expect(await deliver(delivery)).toMatchObject({ status: 200, body: { applied: true } });
    expect(await read(name)).toMatchObject({ state: 'SUCCEEDED', source: 'webhook', userMetadata: { tenant: 'acme', job: '42' } });
    await eventually(() => receiver.applied().some((d) => d.body.data.name === name), 20_000, 'effect');
    expect(receiver.applied().find((d) => d.body.data.name === name)?.body.data.userMetadata).toEqual({ tenant: 'acme', job: '42' });

    const other = 'batches/dyn-v1a-forged';
    expect((await deliver(ed25519Delivery(ed25519Key(), envelope('batch.failed', { id: other })))).status).toBe(401);
    const tampered = ed25519Delivery(ed, envelope('batch.succeeded', { id: other }));
    expect((await deliver({ ...tampered, body: tampered.body.replace('succeeded', 'failed') })).status).toBe(401);
    expect((await ratchet.api(`/operations/${other}`)).status).toBe(404);
  });

  it('never applies the body of a JWT-signed delivery: it polls the operation at once and stores what Gemini says', async () => {
    const name = 'batches/dyn-jwt';
    gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T10:09:00Z' });
    // The body claims a failure; only the poll is believed.
    const delivery = await jwtDelivery(rsa, envelope('batch.failed', { id: name }), { audience: AUDIENCE });
    expect(await deliver(delivery)).toEqual({ status: 200, body: { applied: false, reason: 'verifying-by-poll' } });
    await eventually(async () => (await read(name)).state === 'SUCCEEDED', 20_000, 'the poll');
    expect(await read(name)).toMatchObject({ state: 'SUCCEEDED', source: 'poll', providerState: 'JOB_STATE_SUCCEEDED' }); // the SDK's spelling
    expect(gemini.requests).toContain(name);
    // Its decision says so: tracked (the poll it asks for), the delivery, then the poll's own.
    const { decisions } = (await (await ratchet.api(`/operations/${name}/decisions`)).json()) as { decisions: unknown[] };
    expect(decisions).toEqual([
      expect.objectContaining({ source: 'track', verdict: 'applied', version: 1 }),
      expect.objectContaining({ source: 'webhook', verdict: 'verifying-by-poll', scheme: 'jwt', state: 'FAILED' }),
      expect.objectContaining({ source: 'poll', verdict: 'applied', state: 'SUCCEEDED', version: 2 }),
    ]);
  });

  it('refuses JWTs with a wrong audience, expired, with an unknown kid, alg none, or HS256 with the public key (401, nothing polled)', async () => {
    const name = 'batches/dyn-jwt-forged';
    const body = envelope('batch.succeeded', { id: name });
    const forgeries = [
      await jwtDelivery(rsa, body, { audience: 'https://elsewhere.example' }),
      await jwtDelivery(rsa, body, { audience: AUDIENCE, expiresInSeconds: -120 }),
      await jwtDelivery(rsaKey(), body, { audience: AUDIENCE }),
      unsignedJwtDelivery(body, AUDIENCE),
      await jwtDelivery(rsa, body, { audience: AUDIENCE, alg: 'HS256', secret: publicKeyAsSecret(rsa) }),
    ];
    for (const forged of forgeries) expect((await deliver(forged)).status).toBe(401);
    expect((await ratchet.api(`/operations/${name}`)).status).toBe(404);
    expect(gemini.requests).not.toContain(name);
  });
});
