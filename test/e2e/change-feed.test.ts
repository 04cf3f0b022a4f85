/**
 * The change feed against a real server process (`npm start` on a SQLite
 * file, real HTTP): a storm of shuffled, duplicated deliveries while `watch`
 * consumers connect, drop and resume at random; a cursor past retention; a
 * restart in the middle of a stream and of a watch; `waitFor` woken by the
 * change, and still working by polling against a server without the feed
 * (the shared app as API Gateway runs it); bad input and the token.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../app/http/app.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { parseSigningSecrets } from '../../app/signing-secrets.ts';
import { type OperationChange, RatchetClient, RatchetError, type WatchedChange } from '../../sdk/client.ts';
import { freePort } from '../support/aws/moto.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { type RatchetProcess, startRatchet, TEST_API_TOKEN } from '../support/ratchet-process.ts';
import { shuffle } from '../support/shuffle.ts';
import { silentLogger } from '../support/silent-logger.ts';

const secret = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-feed-'));
let ratchet: RatchetProcess;
let client: RatchetClient;

beforeAll(async () => {
  ratchet = await startRatchet({ DATA_DIR: dataDir, WEBHOOK_SIGNING_SECRETS: secret, TRACK_RATE_PER_MINUTE: '100000' });
  client = new RatchetClient({ url: ratchet.url, token: TEST_API_TOKEN });
});
afterAll(async () => {
  await ratchet?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const run = Date.now().toString(36);

async function deliver(url: string, type: string, id: string, time: string, times = 1): Promise<number> {
  const { body, headers } = signedDelivery(secret, envelope(type, { id, update_time: time }, time));
  let status = 0;
  for (let i = 0; i < times; i++) status = (await fetch(`${url}/webhooks/gemini`, { method: 'POST', body, headers })).status;
  return status;
}

/** Every change the feed holds after `after`, read page by page. */
async function readAll(reader: RatchetClient, after: string): Promise<OperationChange[]> {
  const all: OperationChange[] = [];
  let cursor = after;
  for (;;) {
    const page = await reader.changes({ after: cursor, limit: 1000 });
    all.push(...page.changes);
    if (page.cursor === cursor) return all;
    cursor = page.cursor;
  }
}

/**
 * A consumer that watches for a random while, drops the connection (its
 * long poll aborted mid-wait), and comes back with the cursor of the last
 * change it handled, until it has handled `until()` (the last cursor once the
 * storm is over).
 */
async function consumer(options: {
  after?: string;
  seed: number;
  until: () => string | undefined;
  filter?: { kind?: 'interaction'; state?: 'SUCCEEDED' };
}): Promise<WatchedChange[]> {
  const seen: WatchedChange[] = [];
  // A slow snapshot (its list reads held 50 ms): changes land between the feed's cursor and the records read.
  const watcher = options.after
    ? client
    : new RatchetClient({
        url: ratchet.url,
        token: TEST_API_TOKEN,
        fetch: async (input, init) => {
          if (new URL(String(input)).pathname === '/operations') await sleep(50);
          return fetch(input, init);
        },
      });
  let cursor = options.after;
  let random = options.seed;
  const next = () => {
    random = (random * 1103515245 + 12345) % 2 ** 31;
    return random / 2 ** 31;
  };
  for (let round = 0; ; round++) {
    const stop = new AbortController();
    const timer = setTimeout(() => stop.abort(), 20 + next() * 200);
    try {
      for await (const change of watcher.watch({ ...options.filter, ...(cursor && { after: cursor }), signal: stop.signal })) {
        seen.push(change);
        cursor = change.cursor;
        if (change.cursor === options.until()) break;
      }
    } catch (error) {
      if (!stop.signal.aborted) throw error;
    } finally {
      clearTimeout(timer);
    }
    const until = options.until();
    if (until !== undefined && (cursor === until || seqOf(cursor) >= seqOf(until))) return seen;
    if (round > 2_000) throw new Error('the consumer never caught up');
  }
}

const seqOf = (cursor: string | undefined) => Number(cursor?.split('-')[1] ?? -1);

describe('the change feed', () => {
  it('a storm of shuffled, duplicated deliveries while watchers drop and resume: each keeps commit order, sees every change, none twice', {
    timeout: 120_000,
  }, async () => {
    const start = (await client.changes()).cursor;
    const names = Array.from({ length: 60 }, (_, i) => `interactions/feed-${run}-${i}`);
    // Per operation: tracked, a first state, a newer report of it (a refresh), the end; each delivery twice, all shuffled.
    const deliveries = names.flatMap((name) =>
      (
        [
          ['interaction.requires_action', '2026-12-05T10:00:01Z'],
          ['interaction.requires_action', '2026-12-05T10:00:02Z'],
          ['interaction.completed', '2026-12-05T10:00:03Z'],
        ] as const
      ).map(([type, time]) => ({ name, type, time })),
    );
    let last: string | undefined;
    const until = () => last;
    const keepers = [1, 2, 3, 4].map((seed) => consumer({ after: start, seed, until }));
    const filtered = consumer({ after: start, seed: 5, until, filter: { kind: 'interaction', state: 'SUCCEEDED' } });
    const snapshotters: Array<Promise<WatchedChange[]>> = [];

    const order = shuffle([...names.map((name) => ({ name, type: 'track', time: '' })), ...deliveries], Date.now());
    // Four senders at once; two watchers join with a snapshot a third and two thirds of the way in.
    let sent = 0;
    const sender = async () => {
      for (let item = order.shift(); item; item = order.shift()) {
        if (++sent === 100 || sent === 200) snapshotters.push(consumer({ seed: sent, until }));
        if (item.type === 'track') await client.track(item.name);
        else expect(await deliver(ratchet.url, item.type, item.name.split('/')[1] as string, item.time, 2)).toBe(200);
      }
    };
    await Promise.all([sender(), sender(), sender(), sender()]);
    const everything = await readAll(client, start);
    last = everything.at(-1)?.cursor;

    // The feed itself: per operation, versions 1, 2, 3… up to the stored one, none missing or repeated.
    for (const name of names) {
      const versions = everything.filter((change) => change.name === name).map((change) => change.version);
      const stored = await client.get(name);
      expect(versions).toEqual(Array.from({ length: stored?.version ?? 0 }, (_, i) => i + 1));
      expect(stored?.state).toBe('SUCCEEDED');
    }
    // A consumer that keeps its cursor: exactly the feed, in commit order, whatever its reconnects.
    const cursors = everything.map((change) => change.cursor);
    for (const seen of await Promise.all(keepers)) {
      expect(seen.map((change) => change.cursor)).toEqual(cursors);
      expect(seen.every((change) => !change.snapshot)).toBe(true);
    }
    const succeeded = await filtered;
    expect(succeeded.map((change) => change.cursor)).toEqual(
      everything.filter((change) => change.state === 'SUCCEEDED').map((change) => change.cursor),
    );
    // Joined mid-storm with a snapshot: per operation, in version order, none twice, none missing after the first.
    expect(snapshotters).toHaveLength(2);
    for (const seen of await Promise.all(snapshotters)) {
      expect(seen.filter((change) => change.snapshot).length).toBeGreaterThan(0);
      for (const name of names) {
        const versions = seen.filter((change) => change.name === name).map((change) => change.version);
        const final = everything.filter((change) => change.name === name).at(-1)?.version as number;
        expect(versions.length).toBeGreaterThan(0);
        expect(versions).toEqual(Array.from({ length: final - (versions[0] as number) + 1 }, (_, i) => (versions[0] as number) + i));
      }
    }
  });

  it('waitFor resolves within 100 ms of the change, on one long poll', async () => {
    const name = `batches/feed-wait-${run}`;
    await client.track(name);
    const sent: string[] = [];
    const counting = new RatchetClient({
      url: ratchet.url,
      token: TEST_API_TOKEN,
      fetch: (input, init) => {
        sent.push(new URL(String(input)).search);
        return fetch(input, init);
      },
    });
    let resolvedAt = 0;
    const waiting = counting.waitFor(name, { timeoutMs: 30_000 }).then((operation) => {
      resolvedAt = performance.now();
      return operation;
    });
    await sleep(1_500);
    expect(await deliver(ratchet.url, 'batch.succeeded', name.split('/')[1] as string, '2026-12-05T11:00:00Z')).toBe(200);
    const answeredAt = performance.now();
    expect((await waiting).state).toBe('SUCCEEDED');
    expect(resolvedAt - answeredAt).toBeLessThan(100);
    // The first read answered at once (version 1), the second waited for the change: no read in between.
    expect(sent).toEqual([expect.stringMatching(/afterVersion=0&wait=/), expect.stringMatching(/afterVersion=1&wait=/)]);
  });

  it('the per-operation long poll: at once past the version, else after the wait unchanged; 404 for an unknown one', async () => {
    const name = `batches/feed-op-${run}`;
    await client.track(name);
    const at = async (query: string) => {
      const started = performance.now();
      const response = await ratchet.api(`/operations/${name}?${query}`);
      return {
        status: response.status,
        body: await response.json(),
        ms: performance.now() - started,
        header: response.headers.get('ratchet-long-poll'),
      };
    };
    expect(await at('afterVersion=0&wait=5')).toMatchObject({ status: 200, body: { version: 1 }, header: '5' });
    const unchanged = await at('afterVersion=1&wait=0.5');
    expect(unchanged).toMatchObject({ status: 200, body: { version: 1 } });
    expect(unchanged.ms).toBeGreaterThanOrEqual(450);
    const changed = at('wait=10');
    await sleep(300);
    await deliver(ratchet.url, 'batch.failed', name.split('/')[1] as string, '2026-12-05T11:00:00Z');
    const answer = await changed;
    expect(answer.body).toMatchObject({ version: 2, state: 'FAILED' });
    expect(answer.ms).toBeLessThan(5_000);
    expect((await ratchet.api(`/operations/batches/feed-none-${run}?afterVersion=0&wait=1`)).status).toBe(404);
  });

  it('refuses bad input with the field named, and needs the token', async () => {
    const cases: Array<[string, string]> = [
      ['/changes?after=nope', 'after'],
      ['/changes?after=0123abcd-x', 'after'],
      ['/changes?wait=61', 'wait'],
      ['/changes?wait=-1', 'wait'],
      ['/changes?wait=soon', 'wait'],
      ['/changes?state=DONE', 'state'],
      ['/changes?kind=job', 'kind'],
      ['/changes?name=..%2Fetc', 'name'],
      ['/changes?limit=0', 'limit'],
      ['/changes?sate=SUCCEEDED', 'sate'],
      ['/changes/stream?wait=5', 'wait'],
      ['/changes/stream?state=DONE', 'state'],
      ['/operations/batches/1?wait=100', 'wait'],
      ['/operations/batches/1?afterVersion=-2&wait=1', 'afterVersion'],
      ['/operations/batches/1?afterVersion=1.5', 'afterVersion'],
    ];
    for (const [path, field] of cases) {
      const response = await ratchet.api(path);
      expect({ path, status: response.status, body: await response.json() }).toMatchObject({
        path,
        status: 400,
        body: { error: 'malformed-request', field },
      });
    }
    for (const path of ['/changes', '/changes?wait=1', '/changes/stream', '/operations/batches/1?wait=1']) {
      const response = await fetch(`${ratchet.url}${path}`);
      expect({ path, status: response.status }).toEqual({ path, status: 401 });
      const wrong = await fetch(`${ratchet.url}${path}`, { headers: { authorization: 'Bearer not-the-token-at-all-0000' } });
      expect({ path, status: wrong.status }).toEqual({ path, status: 401 });
    }
    // Another data folder's cursor is not read as this one's.
    const foreign = await ratchet.api('/changes?after=00000000-1');
    expect(foreign.status).toBe(410);
    expect(await foreign.json()).toMatchObject({ error: 'cursor-expired', oldestCursor: expect.any(String) });
  });
});

describe('the change feed across restarts and retention', () => {
  const folder = mkdtempSync(join(tmpdir(), 'ratchet-feed-restart-'));
  let port: number;
  let server: RatchetProcess | undefined;
  const start = async (env: Record<string, string> = {}) => {
    server = await startRatchet({ DATA_DIR: folder, WEBHOOK_SIGNING_SECRETS: secret, PORT: String(port), ...env });
    return server;
  };
  beforeAll(async () => {
    port = await freePort();
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  it('a stream and a watch go on from their cursor after the server restarts in the middle', { timeout: 90_000 }, async () => {
    const first = await start();
    const url = first.url;
    const reader = new RatchetClient({ url, token: TEST_API_TOKEN });
    const origin = (await reader.changes()).cursor;
    const watched: WatchedChange[] = [];
    const stop = new AbortController();
    const watching = (async () => {
      for await (const change of reader.watch({ after: origin, signal: stop.signal })) watched.push(change);
    })().catch((error) => {
      if (!stop.signal.aborted) throw error;
    });
    const stream = await sseEvents(url, `/changes/stream?after=${origin}`);
    for (let i = 0; i < 3; i++) await reader.track(`batches/restart-${run}-${i}`);
    await until(() => stream.events.length === 3 && watched.length === 3);
    const lastId = stream.events.at(-1)?.id as string;

    await first.stop();
    await stream.ended;
    const second = await start();
    expect(second.url).toBe(url);
    for (let i = 3; i < 6; i++) await reader.track(`batches/restart-${run}-${i}`);
    // The stream, as an EventSource reconnects: Last-Event-ID, and the URL it first opened.
    const resumed = await sseEvents(url, `/changes/stream?after=${origin}`, lastId);
    await until(() => resumed.events.length === 3 && watched.length === 6);
    resumed.close();
    stop.abort();
    await watching;
    const names = (events: Array<{ data: string }>) => events.map((event) => (JSON.parse(event.data) as OperationChange).name);
    expect([...names(stream.events), ...names(resumed.events)]).toEqual(Array.from({ length: 6 }, (_, i) => `batches/restart-${run}-${i}`));
    expect(watched.map((change) => change.name)).toEqual(Array.from({ length: 6 }, (_, i) => `batches/restart-${run}-${i}`));
    expect(new Set(watched.map((change) => change.cursor)).size).toBe(6);
  });

  it('a cursor older than the retention is 410 with the oldest cursor still held; watch then begins again with a snapshot', {
    timeout: 90_000,
  }, async () => {
    await server?.stop();
    // Changes are kept 1.8 s here; the derived process prunes when it starts (and every hour).
    let current = await start({ CHANGES_RETENTION_HOURS: '0.0005' });
    const reader = new RatchetClient({ url: current.url, token: TEST_API_TOKEN });
    const old = (await reader.changes()).cursor;
    const name = `batches/retention-${run}`;
    await reader.track(name);
    await sleep(2_500);
    await current.stop();
    current = await start({ CHANGES_RETENTION_HOURS: '0.0005' });
    const gone = await current.api(`/changes?after=${old}`);
    await until(async () => (await current.api(`/changes?after=${old}`)).status === 410);
    const body = (await (await current.api(`/changes?after=${old}`)).json()) as { error: string; oldestCursor: string };
    expect(body).toMatchObject({ error: 'cursor-expired', oldestCursor: expect.stringMatching(/^[0-9a-f]{8}-\d+$/) });
    expect([200, 410]).toContain(gone.status);
    expect((await current.api(`/changes?after=${body.oldestCursor}`)).status).toBe(200);
    expect((await current.api(`/changes/stream?after=${old}`)).status).toBe(410);
    await expect(reader.changes({ after: old })).rejects.toMatchObject({ code: 'cursor-expired', status: 410 });
    // watch does not skip silently: it reads the operations again, flagged as a snapshot.
    const stop = new AbortController();
    for await (const change of reader.watch({ name, after: old, signal: stop.signal })) {
      expect(change).toMatchObject({ name, snapshot: true, version: 1 });
      break;
    }
  });
});

describe('the change feed under pressure', () => {
  const folder = mkdtempSync(join(tmpdir(), 'ratchet-feed-pressure-'));
  let server: RatchetProcess;
  beforeAll(async () => {
    server = await startRatchet({
      DATA_DIR: folder,
      WEBHOOK_SIGNING_SECRETS: secret,
      TRACK_RATE_PER_MINUTE: '1000000',
      FEED_STALL_SECONDS: '1',
      FEED_MAX_WAITING: '5',
      FEED_KEEP_ALIVE_SECONDS: '0.3',
    });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  it('a reader that stops reading is cut off with a last `dropped` event, not buffered; it goes on from its last id', {
    timeout: 90_000,
  }, async () => {
    const { port } = new URL(server.url);
    const socket = connect(Number(port), '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`GET /changes/stream HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nAuthorization: Bearer ${TEST_API_TOKEN}\r\n\r\n`);
    socket.pause(); // takes nothing from now on
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const closed = once(socket, 'close');
    // About 12 MB of changes: more than the socket buffers on both sides hold.
    const writer = new RatchetClient({ url: server.url, token: TEST_API_TOKEN });
    const pad = 'x'.repeat(3_500);
    let next = 0;
    const track = async () => {
      for (let i = next++; i < 3_000; i = next++) await writer.track(`batches/slow-${run}-${i}`, { metadata: { pad } });
    };
    await Promise.all([track(), track(), track(), track()]);
    await sleep(2_500); // past the stall limit
    socket.resume();
    await closed;
    const blocks = Buffer.concat(received).toString('utf8').split('\r\n\r\n').slice(1).join('\r\n\r\n');
    const events = blocks
      .split('\n\n')
      .map((block) =>
        Object.fromEntries(
          block.split('\n').flatMap((line) => (/^(event|id|data): /.test(line) ? [line.split(/: (.*)/s).slice(0, 2)] : [])),
        ),
      )
      .filter((event) => event.data !== undefined);
    const last = events.at(-1) as { event: string; data: string };
    expect(last.event).toBe('dropped');
    const dropped = JSON.parse(last.data);
    expect(dropped).toMatchObject({ error: 'slow-reader' });
    const changes = events.slice(0, -1);
    expect(changes.length).toBeGreaterThan(0);
    expect(changes.length).toBeLessThan(3_000);
    // What it was sent is whole and in order: it goes on from the last id it received, missing nothing.
    const seqs = changes.map((event) => seqOf(event.id));
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => (seqs[0] as number) + i));
    const resumed = (await (await server.api(`/changes?after=${changes.at(-1)?.id}&limit=1`)).json()) as { changes: OperationChange[] };
    expect(seqOf(resumed.changes[0]?.cursor)).toBe((seqs.at(-1) as number) + 1);
  });

  it('an idle stream gets a comment line every FEED_KEEP_ALIVE_SECONDS, and nothing else', async () => {
    const stop = new AbortController();
    const response = await server.api('/changes/stream?kind=video', { signal: stop.signal });
    let text = '';
    const started = performance.now();
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        text += Buffer.from(chunk).toString('utf8');
        if ((text.match(/: keep-alive\n\n/g) ?? []).length >= 3) break;
      }
    } finally {
      stop.abort();
    }
    expect(text.replace(/: keep-alive\n\n/g, '')).toBe('');
    expect(performance.now() - started).toBeGreaterThanOrEqual(800);
  });

  it('long polls past FEED_MAX_WAITING are answered 503 with Retry-After; deliveries go on meanwhile', async () => {
    const stop = new AbortController();
    const held = Array.from({ length: 5 }, () =>
      server.api('/changes?wait=30', { signal: stop.signal }).catch((error) => (stop.signal.aborted ? undefined : Promise.reject(error))),
    );
    await sleep(500);
    const refused = await server.api('/changes?wait=30');
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await refused.json()).toMatchObject({ error: 'overloaded' });
    expect(await deliver(server.url, 'batch.succeeded', `busy-${run}`, '2026-12-05T12:00:00Z')).toBe(200);
    stop.abort();
    await Promise.all(held);
    await until(async () => (await server.api('/changes?wait=0')).status === 200);
  });
});

describe('waitFor against a server without the feed', () => {
  it('falls back to polling when the server does not hold the read (the shared app as API Gateway runs it)', async () => {
    const store = new MemoryStore();
    const app = createApp({
      store,
      verifier: new WebhookSignatureVerifier(async () => parseSigningSecrets(secret)),
      logger: silentLogger,
    });
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' });
    await new Promise((resolve) => server.once('listening', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const sent: string[] = [];
      const reader = new RatchetClient({
        url,
        signer: 'none',
        fetch: (input, init) => {
          sent.push(new URL(String(input)).search);
          return fetch(input, init);
        },
      });
      const name = `batches/no-feed-${run}`;
      await reader.track(name);
      const waiting = reader.waitFor(name, { timeoutMs: 20_000 });
      await sleep(1_200);
      expect(await deliver(url, 'batch.succeeded', name.split('/')[1] as string, '2026-12-05T11:00:00Z')).toBe(200);
      expect((await waiting).state).toBe('SUCCEEDED');
      // One long poll tried (answered at once, without the header), then plain reads after 1 s, 2 s…
      expect(sent[1]).toMatch(/wait=/);
      expect(sent.slice(2).every((query) => query === '')).toBe(true);
      expect(sent.length).toBeGreaterThanOrEqual(3);
    } finally {
      server.close();
    }
  });

  it('a non-retryable error ends watch with it', async () => {
    const reader = new RatchetClient({ url: ratchet.url, token: 'a-wrong-token-for-this-server' });
    const error = await (async () => {
      for await (const _ of reader.watch({ after: (await client.changes()).cursor })) break;
    })().catch((e) => e);
    expect(error).toBeInstanceOf(RatchetError);
    expect(error).toMatchObject({ code: 'unauthorized' });
  });
});

async function until(check: () => boolean | Promise<boolean>, withinMs = 20_000): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(25);
  }
}

/** Reads a change stream as an EventSource would: events with their id, until closed or the server goes. */
async function sseEvents(url: string, path: string, lastEventId?: string) {
  const stop = new AbortController();
  const response = await fetch(`${url}${path}`, {
    headers: { authorization: `Bearer ${TEST_API_TOKEN}`, ...(lastEventId && { 'last-event-id': lastEventId }) },
    signal: stop.signal,
  });
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const events: Array<{ event?: string; id?: string; data: string }> = [];
  const ended = (async () => {
    let buffer = '';
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffer += decoder.decode(chunk, { stream: true });
        let end = buffer.indexOf('\n\n');
        while (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          end = buffer.indexOf('\n\n');
          const fields = Object.fromEntries(
            block
              .split('\n')
              .filter((line) => !line.startsWith(':'))
              .map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]),
          );
          if (fields.data !== undefined) events.push(fields as { event?: string; id?: string; data: string });
        }
      }
    } catch {
      // closed: by us, or by the server going away
    }
  })();
  return { events, ended, close: () => stop.abort() };
}
