/**
 * The webhook's headers as its OpenAPI description states them and as the
 * route takes them, held together: every delivery, a dynamic webhook's JWT
 * included, carries `webhook-id`, `webhook-timestamp` and
 * `webhook-signature` (the JWT travels in the last, as Google's guide says);
 * a delivery without one of them is a 401, so the description marks all
 * three required.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../app/http/app.ts';
import { openApiDocument } from '../../app/http/openapi.ts';
import { WebhookKeySet } from '../../app/http/webhook-keys.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { envelope, newSecret } from '../support/deliveries.ts';
import { ed25519Key, GOOGLE_ISSUER, jwtDelivery, KeyServer, rsaKey } from '../support/google-keys.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { silentLogger } from '../support/silent-logger.ts';

const HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;
const AUDIENCE = 'https://ratchet.example/webhooks/gemini';
const rsa = rsaKey();
const keys = new KeyServer(ed25519Key(), rsa);
let app: ReturnType<typeof createApp>;
const polled: string[] = [];

beforeAll(async () => {
  await keys.start();
  const store = new MemoryStore();
  app = createApp({
    store,
    receipts: store,
    unprocessable: store,
    verifier: new WebhookSignatureVerifier(async () => [newSecret()], {
      keys: new WebhookKeySet(keys.url),
      audience: AUDIENCE,
      issuer: GOOGLE_ISSUER,
    }),
    pollNow: async ({ name }) => {
      polled.push(name);
      return 'scheduled';
    },
    logger: silentLogger,
  });
});
afterAll(() => keys.stop());

const deliver = (body: string, headers: Record<string, string>) => app.request('/webhooks/gemini', { method: 'POST', body, headers });
const jwtSigned = () => jwtDelivery(rsa, envelope('batch.succeeded', { id: 'batches/jwt-headers' }), { audience: AUDIENCE });

describe("the webhook's headers", () => {
  it('are each required by the description, which says where a JWT travels', () => {
    const post = (openApiDocument() as { paths: Record<string, { post: { parameters: Array<Record<string, unknown>> } }> }).paths[
      '/webhooks/gemini'
    ]?.post;
    const headers = post?.parameters.filter((p) => p.in === 'header') ?? [];
    expect(headers.map((p) => [p.name, p.required])).toEqual(HEADERS.map((name) => [name, true]));
    const signature = headers.find((p) => p.name === 'webhook-signature');
    expect(signature?.description).toMatch(/JWT/);
    expect(JSON.stringify(post)).not.toMatch(/Authorization: Bearer <jwt>/);
  });

  it('take a JWT-signed delivery that carries all three, the JWT in webhook-signature', async () => {
    const { body, headers } = await jwtSigned();
    const answer = await deliver(body, headers);
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ applied: false, reason: 'verifying-by-poll' });
    expect(polled).toContain('batches/jwt-headers');
  });

  it.each(HEADERS)('refuse a JWT-signed delivery without %s (401), its JWT offered as a bearer token or not', async (left) => {
    const { body, headers } = await jwtSigned();
    const jwt = headers['webhook-signature'] as string;
    const { [left]: _, ...without } = headers;
    for (const offered of [without, { ...without, authorization: `Bearer ${jwt}` }]) {
      const answer = await deliver(body, offered);
      expect(answer.status).toBe(401);
      expect(await answer.json()).toMatchObject({ error: 'invalid-signature' });
    }
  });
});
