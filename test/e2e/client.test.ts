/**
 * `ratchet/client` against the local runtime over real HTTP (the embedded
 * engine on a SQLite file): every method, waitFor started after the change,
 * before it, timing out, aborted and unreachable; a 503 retried (injected in
 * front of fetch, the one fault here).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { RatchetClient, RatchetError } from '../../sdk/client.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';

const secret = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-client-'));
let runtime: LocalRuntime;
let client: RatchetClient;
/** Every request the client sent, as `METHOD path`. */
const sent: string[] = [];
const counting: typeof fetch = (input, init) => {
  const url = new URL(String(input));
  sent.push(`${init?.method ?? 'GET'} ${url.pathname}${url.search}`);
  return fetch(input, init);
};

beforeAll(async () => {
  runtime = await startLocalRuntime(loadConfig({ DATA_DIR: dataDir, PORT: '0', WEBHOOK_SIGNING_SECRETS: secret }));
  client = new RatchetClient({ url: runtime.url, token: runtime.apiToken, fetch: counting });
});

afterAll(async () => {
  await runtime?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

let seq = 0;
const batch = () => `batches/client-${Date.now().toString(36)}-${seq++}`;

/** Gemini's signed webhook for `name`, as it would arrive. */
async function webhook(type: 'batch.succeeded' | 'batch.failed', name: string, at = '2026-12-04T10:00:00Z') {
  const { body, headers } = signedDelivery(secret, envelope(type, { id: name }, at));
  const response = await fetch(`${runtime.url}/webhooks/gemini`, { method: 'POST', body, headers });
  expect(response.status).toBe(200);
}

describe('RatchetClient against the local runtime', () => {
  it('tracks a job once, with the application’s metadata on its record', async () => {
    const name = batch();
    const first = await client.track(name, { metadata: { order: 'A-17', attempt: 2 } });
    expect(first.created).toBe(true);
    expect(first.operation).toMatchObject({ name, kind: 'batch', state: null, version: 1, userMetadata: { order: 'A-17', attempt: 2 } });
    const again = await client.track(name);
    expect(again.created).toBe(false);
    expect(again.operation.version).toBe(1);

    const stored = await client.get(name);
    expect(stored).toMatchObject({ name, state: null, userMetadata: { order: 'A-17', attempt: 2 } });
    expect(stored?.polling).toBeDefined();
  });

  it('get answers undefined for an unknown job; a bad name is a typed error', async () => {
    expect(await client.get(batch())).toBeUndefined();
    const error = await client.track('batches/../etc').catch((e) => e);
    expect(error).toBeInstanceOf(RatchetError);
    expect(error).toMatchObject({ code: 'malformed-request', status: 400 });
  });

  it('lists with filters and pages, and reads history in version order', async () => {
    const earlier = batch();
    await webhook('batch.succeeded', earlier);
    const name = batch();
    await client.track(name);
    await webhook('batch.succeeded', name);
    const page = await client.list({ state: 'SUCCEEDED', kind: 'batch', limit: 1 });
    expect(page.operations).toHaveLength(1);
    expect(page.operations[0]).toMatchObject({ name, state: 'SUCCEEDED' });
    expect(page.nextCursor).toBeDefined();
    const next = await client.list({ state: 'SUCCEEDED', kind: 'batch', limit: 1, cursor: page.nextCursor });
    expect(next.operations[0]?.name).toBe(earlier);

    // History is written by the derived-work process, a moment after the write: wait as the other e2e tests do.
    await expect
      .poll(async () => (await client.history(name)).map((h) => [h.version, h.state]), { timeout: 15_000 })
      .toEqual([
        [1, null],
        [2, 'SUCCEEDED'],
      ]);
    await expect(client.list({ limit: 500 })).rejects.toMatchObject({ code: 'malformed-request', status: 400 });
  });

  it('waitFor, called after the change, answers from the stored record with one request', async () => {
    const name = batch();
    await webhook('batch.succeeded', name);
    sent.length = 0;
    const done = await client.waitFor(name, { until: 'terminal' });
    expect(done).toMatchObject({ name, state: 'SUCCEEDED' });
    // The long poll's first read answers at once: the record is past version 0.
    expect(sent).toEqual([`GET /operations/${name}?afterVersion=0&wait=25.000`]);
    sent.length = 0;
    await client.waitFor(name, { until: 'terminal', longPoll: false });
    expect(sent).toEqual([`GET /operations/${name}`]);
  });

  it('waitFor, called before the change, resolves when it lands, reporting each new version', async () => {
    const name = batch();
    await client.track(name);
    const seen: Array<string | null> = [];
    const waiting = client.waitFor(name, { until: 'SUCCEEDED', timeoutMs: 30_000, onChange: (op) => seen.push(op.state) });
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await webhook('batch.succeeded', name);
    expect(await waiting).toMatchObject({ name, state: 'SUCCEEDED', version: 2 });
    expect(seen).toEqual([null, 'SUCCEEDED']);
  });

  it('waitFor times out with the last read record; by polling, reads back off (1 s, 2 s, …)', async () => {
    const name = batch();
    await client.track(name);
    sent.length = 0;
    let started = Date.now();
    let error = await client.waitFor(name, { timeoutMs: 3_500, longPoll: false }).catch((e) => e);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3_400);
    expect(error).toMatchObject({ code: 'timeout', operation: { name, state: null } });
    // Reads at 0, 1, 3 and 3.5 s: not one a second.
    expect(sent).toHaveLength(4);
    // On the long poll: one read that answers at once, one held to the deadline.
    sent.length = 0;
    started = Date.now();
    error = await client.waitFor(name, { timeoutMs: 1_500 }).catch((e) => e);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_400);
    expect(error).toMatchObject({ code: 'timeout', operation: { name, state: null } });
    expect(sent.length).toBeLessThanOrEqual(3);
    expect(sent[1]).toMatch(/afterVersion=1&wait=1\.\d{3}$/);
  });

  it('waitFor rejects at once for a job that ended otherwise, an unknown job, and an aborted wait', async () => {
    const failed = batch();
    await webhook('batch.failed', failed);
    await expect(client.waitFor(failed, { until: 'SUCCEEDED' })).rejects.toMatchObject({
      code: 'unreachable',
      operation: { state: 'FAILED' },
    });
    // A state already passed counts as reached.
    const done = batch();
    await webhook('batch.succeeded', done);
    expect(await client.waitFor(done, { until: 'RUNNING' })).toMatchObject({ state: 'SUCCEEDED' });

    await expect(client.waitFor(batch())).rejects.toMatchObject({ code: 'not-found' });

    const open = batch();
    await client.track(open);
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('user gave up')), 300);
    await expect(client.waitFor(open, { signal: controller.signal })).rejects.toThrow('user gave up');
    // An abort also ends a read in flight (a Ratchet that does not answer), at once and without retrying it.
    const hanging = new RatchetClient({
      url: runtime.url,
      fetch: (_input, init) => new Promise((_, reject) => init?.signal?.addEventListener('abort', () => reject(init.signal?.reason))),
    });
    const stuck = new AbortController();
    setTimeout(() => stuck.abort(new Error('stopped waiting')), 200);
    const started = Date.now();
    await expect(hanging.waitFor(open, { signal: stuck.signal })).rejects.toThrow('stopped waiting');
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('retries a 503 and API Gateway’s 429, 502 and 504 with backoff, and reports them typed once retries run out', async () => {
    const passing = [
      [503, { error: 'not-recorded', message: 'store unavailable; retry later' }],
      [429, { message: 'Too Many Requests' }],
      [502, { message: 'Internal Server Error' }],
      [504, { message: 'Endpoint request timed out' }],
    ] as const;
    let unavailable = passing.length;
    const flaky: typeof fetch = async (input, init) => {
      const [status, body] = passing[passing.length - unavailable] ?? [];
      if (unavailable-- > 0) return new Response(JSON.stringify(body), { status });
      return fetch(input, init);
    };
    const name = batch();
    const retrying = new RatchetClient({ url: runtime.url, token: runtime.apiToken, fetch: flaky });
    expect((await retrying.track(name)).created).toBe(true);
    expect(unavailable).toBe(-1);

    const down: typeof fetch = async () =>
      new Response(JSON.stringify({ error: 'not-recorded', message: 'store unavailable' }), { status: 503 });
    const error = await new RatchetClient({ url: runtime.url, token: runtime.apiToken, fetch: down, retries: 1 }).get(name).catch((e) => e);
    expect(error).toMatchObject({ code: 'not-recorded', status: 503 });

    const refused = await new RatchetClient({ url: 'http://127.0.0.1:9', retries: 0 }).get(name).catch((e) => e);
    expect(refused).toMatchObject({ code: 'network' });
  });
});

describe('the client says what is wrong at once, in its own words', () => {
  it("checks waitFor's options before any request: a state in lower case, one that does not exist, a negative timeout", async () => {
    const before = sent.length;
    for (const [until, says] of [
      ['succeeded', /not "succeeded" \(did you mean 'SUCCEEDED'\?\)/],
      ['DONE', /until must be 'terminal' or one of PENDING, RUNNING, REQUIRES_ACTION, SUCCEEDED, FAILED, CANCELLED, EXPIRED, not "DONE"$/],
      ['Terminal', /did you mean 'terminal'/],
    ] as const) {
      const error = await client.waitFor(batch(), { until: until as never }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RatchetError);
      expect(error).toMatchObject({ code: 'invalid-argument', message: expect.stringMatching(says) });
    }
    await expect(client.waitFor(batch(), { timeoutMs: -1 })).rejects.toMatchObject({ code: 'invalid-argument' });
    expect(sent.length).toBe(before);
  });

  it('ends a watch quietly when its signal aborts, whether it was waiting or between changes', async () => {
    const stop = new AbortController();
    const seen: string[] = [];
    const watching = (async () => {
      for await (const change of client.watch({ signal: stop.signal, kind: 'batch' })) seen.push(change.name);
      return 'ended';
    })();
    const name = batch();
    await webhook('batch.succeeded', name);
    await expect.poll(() => seen.includes(name), { timeout: 15_000 }).toBe(true);
    stop.abort();
    await expect(watching).resolves.toBe('ended');
  });

  it('names the cause of a refused connection (ECONNREFUSED), not just "fetch failed"', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const nobody = new RatchetClient({ url: `http://127.0.0.1:${port}`, token: 'x'.repeat(16), retries: 0 });
    const error = (await nobody.get('batches/x').catch((e: unknown) => e)) as RatchetError;
    expect(error).toBeInstanceOf(RatchetError);
    expect(error.code).toBe('network');
    expect(error.causeCode).toBe('ECONNREFUSED');
    expect(error.message).toBe(`GET http://127.0.0.1:${port}/operations/batches/x: connection refused (ECONNREFUSED), after 1 attempts`);
  });
});
