/**
 * `GET /openapi.json` on every home: one machine (`ratchet start`), inside an
 * app under its basePath (SQLite in memory) and on PostgreSQL; behind the API
 * token. Then every route of the description asked of the mounted app in
 * process (where the fetch the setup file checks does not pass), each answer
 * held to the description.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { openApiDocument } from '../../app/http/openapi.ts';
import { createRatchet, type Ratchet } from '../../local/library.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { violationOf } from '../support/openapi-answers.ts';
import { startRatchet } from '../support/ratchet-process.ts';

const secret = newSecret();
const TOKEN = 'openapi-test-token-0123456789abcdef';
const BASE = '/api/ratchet';
const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

function open(options: Parameters<typeof createRatchet>[0]): Ratchet {
  const ratchet = createRatchet({ webhookSigningSecrets: secret, apiToken: TOKEN, env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL' }, ...options });
  cleanup.push(() => ratchet.close());
  return ratchet;
}

/** `path` asked of the mounted app in process, its answer held to the description. */
async function ask(ratchet: Ratchet, method: string, path: string, body?: unknown, token: string | null = TOKEN) {
  const url = `http://127.0.0.1${BASE}${path}`;
  const response = await ratchet.fetch(
    new Request(url, {
      method,
      headers: { ...(token && { authorization: `Bearer ${token}` }), ...(body !== undefined && { 'content-type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    }),
  );
  const json = /json/.test(response.headers.get('content-type') ?? '') ? await response.json() : await response.text();
  expect(violationOf(method, url, response.status, json)).toBeUndefined();
  return { status: response.status, body: json as Record<string, unknown> };
}

describe('GET /openapi.json', () => {
  it('on one machine: the description, behind the API token', async () => {
    const ratchet = await startRatchet({});
    cleanup.push(() => ratchet.stop());
    const answer = await fetch(`${ratchet.url}/openapi.json`, { headers: { authorization: `Bearer ${ratchet.apiToken}` } });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual(openApiDocument());
    expect((await fetch(`${ratchet.url}/openapi.json`)).status).toBe(401);
  });

  it('inside an app: under its basePath, which is its server; every route answers as described', async () => {
    const ratchet = open({ dataDir: ':memory:', basePath: BASE });
    const description = await ask(ratchet, 'GET', '/openapi.json');
    expect(description).toEqual({ status: 200, body: openApiDocument(BASE) });
    expect((await ask(ratchet, 'GET', '/openapi.json', undefined, null)).status).toBe(401);

    const delivery = (type: string, id: string, eventId: string) => {
      const { body, headers } = signedDelivery(secret, envelope(type, { id }), { id: eventId });
      return ratchet.fetch(new Request(`http://127.0.0.1${BASE}/webhooks/gemini`, { method: 'POST', headers, body }));
    };
    for (const [type, eventId] of [
      ['batch.succeeded', 'e1'],
      ['batch.succeeded', 'e1'],
    ]) {
      const response = await delivery(type as string, 'batches/described', eventId as string);
      expect(
        violationOf('POST', response.url || `http://127.0.0.1${BASE}/webhooks/gemini`, response.status, await response.json()),
      ).toBeUndefined();
    }
    expect((await ask(ratchet, 'POST', '/operations', { name: 'batches/tracked', metadata: { order: 1 } })).status).toBe(201);
    expect((await ask(ratchet, 'POST', '/operations', { name: 'batches/tracked' })).status).toBe(200);
    expect((await ask(ratchet, 'POST', '/operations', { name: 'not a name' })).status).toBe(400);
    const listed = await ask(ratchet, 'GET', '/operations?limit=1');
    expect(listed.body.nextCursor).toBeDefined();
    expect((await ask(ratchet, 'GET', '/operations?kind=batch&state=SUCCEEDED')).body.operations).toHaveLength(1);
    expect((await ask(ratchet, 'GET', '/operations/batches%2Fdescribed')).body.state).toBe('SUCCEEDED');
    expect((await ask(ratchet, 'GET', '/operations/batches/described?wait=0')).status).toBe(200);
    expect((await ask(ratchet, 'GET', '/operations/batches/unknown')).status).toBe(404);
    await expect.poll(async () => (await ask(ratchet, 'GET', '/operations/batches/described/history')).body.history).toHaveLength(1);
    expect((await ask(ratchet, 'GET', '/operations/batches/described/decisions')).body.decisions).toHaveLength(2);
    expect((await ask(ratchet, 'GET', '/decisions?outcome=unprocessable')).status).toBe(200);
    const head = await ask(ratchet, 'GET', '/changes');
    expect((await ask(ratchet, 'GET', `/changes?after=${head.body.cursor}&kind=batch&limit=5`)).status).toBe(200);
    expect((await ask(ratchet, 'GET', '/changes?limit=0')).body).toMatchObject({ error: 'malformed-request', field: 'limit' });
    expect((await ask(ratchet, 'GET', '/effects/dead-letters')).status).toBe(404);
    expect((await ask(ratchet, 'POST', '/effects/redrive', {})).status).toBe(404);
    expect((await ask(ratchet, 'GET', '/healthz', undefined, null)).body).toEqual({ status: 'ok' });
    expect((await ask(ratchet, 'POST', '/login/link')).body.expiresInSeconds).toBeGreaterThan(0);
  });

  it('on PostgreSQL: the same description', async () => {
    const ratchet = open({ databaseUrl: inject('postgresUrl'), schema: `openapi_${Date.now().toString(36)}` });
    const response = await ratchet.fetch(new Request('http://127.0.0.1/openapi.json', { headers: { authorization: `Bearer ${TOKEN}` } }));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(openApiDocument());
  });
});
