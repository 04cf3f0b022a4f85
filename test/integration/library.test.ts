/**
 * Ratchet inside an application (local/library.ts, docs/apps.md): one fetch
 * handler under a prefix, `tick` for a cron, `onChange` handed the app's own
 * function, the client in process. On SQLite in memory and on the test
 * PostgreSQL (the application's own `pg` pool), and mounted in a real Hono app
 * and a real Express app over HTTP.
 */
import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { getRequestListener, serve } from '@hono/node-server';
import express from 'express';
import { Hono } from 'hono';
import pg from 'pg';
import { afterAll, describe, expect, inject, it, vi } from 'vitest';
import { createRatchet, type Ratchet, type StateChange } from '../../local/library.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';
import { shuffle } from '../support/shuffle.ts';

const run = promisify(execFile);
const url = inject('postgresUrl');
const secret = newSecret();
const TOKEN = 'library-test-token-0123456789abcdef';
const BASE = '/api/ratchet';
const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

/** Quiet, fast retries; nothing read from this process's environment. */
const ENV = {
  POWERTOOLS_LOG_LEVEL: 'CRITICAL',
  EFFECTS_RETRY_BASE_MS: '20',
  EFFECTS_RETRY_MAX_MS: '50',
};

function webhook(origin: string, type: string, id: string): Request {
  const { body, headers } = signedDelivery(secret, envelope(type, { id }));
  return new Request(`${origin}${BASE}/webhooks/gemini`, { method: 'POST', headers, body });
}

function open(options: Parameters<typeof createRatchet>[0]): Ratchet {
  const ratchet = createRatchet({
    webhookSigningSecrets: secret,
    apiToken: TOKEN,
    basePath: BASE,
    ...options,
    env: { ...ENV, ...options?.env },
  });
  cleanup.push(() => ratchet.close());
  return ratchet;
}

const bearer = { authorization: `Bearer ${TOKEN}` };

describe('createRatchet', () => {
  it('serves the webhook, the API and the console under its prefix, hands each change to onChange, and reads in process (SQLite in memory)', async () => {
    const seen: StateChange[] = [];
    const ratchet = open({ dataDir: ':memory:', onChange: (change) => void seen.push(change) });
    const answer = await ratchet.fetch(webhook('http://127.0.0.1', 'batch.succeeded', 'batches/lib-1'));
    expect(answer.status).toBe(200);
    await eventually(() => seen.length === 1, 5_000, 'onChange');
    expect(seen[0]).toMatchObject({
      id: 'batches/lib-1#1',
      type: 'operation.state_changed',
      data: { name: 'batches/lib-1', state: 'SUCCEEDED' },
    });

    // RatchetClient's reads and track, in process: on the Ratchet itself and as ratchet.client.
    expect((await ratchet.get('batches/lib-1'))?.state).toBe('SUCCEEDED');
    expect((await ratchet.client.waitFor('batches/lib-1', { timeoutMs: 1_000 })).state).toBe('SUCCEEDED');
    const watched: string[] = [];
    const watching = (async () => {
      for await (const change of ratchet.watch({ kind: 'batch', signal: AbortSignal.timeout(5_000) })) {
        watched.push(`${change.name}#${change.version}${change.snapshot ? ' (snapshot)' : ''}`);
        if (change.name === 'batches/lib-2') return;
      }
    })();
    const tracked = await ratchet.track('batches/lib-2', { metadata: { user: 'u1' } });
    expect(tracked.created).toBe(true);
    await watching;
    expect(watched).toEqual(['batches/lib-1#1 (snapshot)', 'batches/lib-2#1']);
    // History is derived from the outbox on SQLite: a moment after.
    await eventually(async () => (await ratchet.history('batches/lib-2')).length === 1, 5_000, 'history');

    const list = await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/operations`, { headers: bearer }));
    expect(list.status).toBe(200);
    expect(JSON.stringify(await list.json())).toContain('batches/lib-1');
    expect((await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/operations`))).status).toBe(401);
    expect((await ratchet.fetch(new Request('http://127.0.0.1/operations', { headers: bearer }))).status).toBe(404);
    expect((await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/healthz`))).status).toBe(200);

    // The console's links stay under the prefix; a page asked for without a session lands on the sign-in under it too.
    const page = await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/`, { headers: { ...bearer, accept: 'text/html' } }));
    const html = await page.text();
    expect(html).toContain(`href="${BASE}/console/operations/batches/lib-1"`);
    expect(html).not.toMatch(/href="\/console/);
    const signIn = await ratchet.fetch(
      new Request(`http://127.0.0.1${BASE}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `token=${TOKEN}&next=/console/operations/batches/lib-1`,
      }),
    );
    expect(signIn.status).toBe(303);
    expect(signIn.headers.get('location')).toBe(`${BASE}/console/operations/batches/lib-1`);
  });

  it('serves /metrics under its prefix with the API token: each webhook counted, onChange’s lag under sink app, its backlog', async () => {
    const seen: StateChange[] = [];
    const ratchet = open({ dataDir: ':memory:', onChange: (change) => void seen.push(change) });
    for (const id of ['batches/lib-metrics-1', 'batches/lib-metrics-2'])
      expect((await ratchet.fetch(webhook('http://127.0.0.1', 'batch.succeeded', id))).status).toBe(200);
    expect((await ratchet.fetch(webhook('http://127.0.0.1', 'batch.succeeded', 'batches/lib-metrics-1'))).status).toBe(200);
    await eventually(() => seen.length === 2, 5_000, 'onChange');
    expect((await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/metrics`))).status).toBe(401);
    let text = '';
    await eventually(
      async () => {
        const answer = await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/metrics`, { headers: bearer }));
        text = await answer.text();
        return text.includes('ratchet_effect_lag_seconds_count{sink="app"} 2');
      },
      5_000,
      'both effects counted',
    );
    expect(text).toContain('ratchet_webhook_deliveries_total{decision="applied",reason=""} 2');
    expect(text).toMatch(/ratchet_webhook_deliveries_total\{decision="discarded",reason="(duplicate|stale-or-equal-update-time)"\} 1/);
    expect(text).toContain('ratchet_operations{provider="gemini",kind="batch",state="SUCCEEDED"} 2');
    expect(text).toContain('ratchet_effects_pending{sink="app"} 0');
    expect((await ratchet.fetch(new Request('http://127.0.0.1/metrics', { headers: bearer }))).status).toBe(404);
  });

  it('refuses an OpenTelemetry setting it cannot use when it is made, not on its first request', () => {
    vi.stubEnv('OTEL_EXPORTER_OTLP_ENDPOINT', 'http://127.0.0.1:4318');
    vi.stubEnv('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'grpc');
    try {
      expect(() => createRatchet({ dataDir: ':memory:', env: {} })).toThrow(
        /^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http\/protobuf or http\/json/,
      );
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it('mounted at the root, serves a request read off a socket as it is, and refuses a Host it does not serve', async () => {
    const ratchet = open({ dataDir: ':memory:', basePath: '' });
    const asked = (host: string) => ratchet.fetch(new Request('http://127.0.0.1/operations', { headers: { ...bearer, host } }));
    expect((await asked('127.0.0.1:3000')).status).toBe(200);
    expect((await asked('rebound.example')).status).toBe(421);
  });

  it('refuses a bad setting at once, in one line naming it, and opens nothing', () => {
    expect(() => createRatchet({ dataDir: ':memory:', webhookSigningSecrets: 'topsecret', env: {} })).toThrow(/WEBHOOK_SIGNING_SECRETS/);
    expect(() => createRatchet({ dataDir: ':memory:', basePath: 'api ratchet', env: {} })).toThrow(/basePath must be a path/);
    expect(() => createRatchet({ databaseUrl: 'mysql://x', env: {} })).toThrow(/DATABASE_URL must be a postgres:\/\/ URL/);
  });

  it('refuses no signing secret on PostgreSQL, naming both names; in memory it makes one and says so', async () => {
    const refuse = (options: Parameters<typeof createRatchet>[0]) => () =>
      createRatchet({ ...options, env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL' } });
    for (const options of [{ databaseUrl: url }, { pool: new pg.Pool({ connectionString: url, max: 1 }) }]) {
      expect(refuse(options)).toThrow(/^webhookSigningSecrets \(WEBHOOK_SIGNING_SECRETS\) must be set on PostgreSQL/);
    }
    // A data folder keeps a development secret in a file, as ratchet start does (and says where once it opens): a
    // build step that imports the app's module (next build) creates one without a secret and opens nothing.
    expect(refuse({ dataDir: join(PROJECT_ROOT, '.never') })).not.toThrow();
    const logged: string[] = [];
    const streams = [process.stdout, process.stderr];
    const writes = streams.map((stream) => stream.write);
    for (const stream of streams) stream.write = ((chunk: string) => logged.push(String(chunk)) > 0) as typeof stream.write;
    let ratchet: Ratchet;
    try {
      ratchet = createRatchet({ dataDir: ':memory:', env: { POWERTOOLS_LOG_LEVEL: 'WARN' } });
    } finally {
      streams.forEach((stream, i) => {
        stream.write = writes[i] as typeof stream.write;
      });
    }
    cleanup.push(() => ratchet.close());
    expect(logged.join('')).toMatch(/no webhookSigningSecrets \(WEBHOOK_SIGNING_SECRETS\): a secret for this process only was generated/);
  });

  it('answers 503 closed once closed, not "cannot reach its database"', async () => {
    const ratchet = open({ dataDir: ':memory:' });
    expect((await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/healthz`))).status).toBe(200);
    await ratchet.close();
    const answer = await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/healthz`));
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('1');
    expect(await answer.json()).toMatchObject({ error: 'closed' });
  });

  it('answers 503 while its database cannot be reached, and says why once asked', async () => {
    const ratchet = open({ databaseUrl: 'postgres://nobody@127.0.0.1:1/none', schema: 'lib_unreachable' });
    const answer = await ratchet.fetch(webhook('http://127.0.0.1', 'batch.succeeded', 'batches/lib-x'));
    expect(answer.status).toBe(503);
    expect(answer.headers.get('retry-after')).toBe('5');
    expect(await answer.json()).toMatchObject({ error: 'not-recorded' });
    await expect(ratchet.ready()).rejects.toThrow(/cannot reach the database/);
  });

  describe('on PostgreSQL, with the application pool', () => {
    const pool = new pg.Pool({ connectionString: url, max: 12 });
    cleanup.push(() => pool.end());

    it('ticks at once on two instances and a third started: each change once, in version order, written in its delivery transaction', async () => {
      const schema = 'lib_ticks';
      await pool.query('CREATE TABLE IF NOT EXISTS lib_ticks_seen (id text NOT NULL, name text NOT NULL, version int NOT NULL, at serial)');
      const calls: string[] = [];
      const onChange = async (change: StateChange, { sql }: { sql?: (text: string, values?: unknown[]) => Promise<unknown> }) => {
        calls.push(change.id);
        await sql?.('INSERT INTO lib_ticks_seen (id, name, version) VALUES ($1, $2, $3)', [
          change.id,
          change.data.name,
          change.data.version,
        ]);
      };
      const a = open({ pool, schema, onChange });
      const b = open({ pool, schema, onChange });
      const c = open({ pool, schema, onChange });
      await c.start(); // a resident one beside the cron's
      const names = Array.from({ length: 24 }, (_, i) => `interactions/lib-${i}`);
      const deliveries = shuffle(
        names.flatMap((name) => [
          ['interaction.requires_action', name],
          ['interaction.completed', name],
        ]),
        7,
      );
      const instances = [a, b, c];
      await Promise.all(
        deliveries.map(async ([type, name], i) => {
          const answer = await (instances[i % 3] as Ratchet).fetch(webhook('http://127.0.0.1', type as string, name as string));
          expect(answer.status).toBe(200);
        }),
      );
      const expected = new Set<string>();
      for (const name of names) {
        const view = await a.client.get(name);
        for (const entry of await a.client.history(name)) if (entry.stateChanged !== false) expected.add(`${name}#${entry.version}`);
        expect(view?.state).toBe('SUCCEEDED');
      }
      for (let round = 0; round < 20; round++) {
        await Promise.all([a.tick({ budgetMs: 2_000 }), b.tick({ budgetMs: 2_000 }), a.tick({ budgetMs: 2_000 })]);
        const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM lib_ticks_seen');
        if ((rows[0]?.n ?? 0) >= expected.size) break;
      }
      const { rows } = await pool.query<{ id: string; name: string; version: number }>(
        'SELECT id, name, version FROM lib_ticks_seen ORDER BY at',
      );
      expect(rows.map((r) => r.id).sort()).toEqual([...expected].sort());
      for (const name of names) {
        const versions = rows.filter((r) => r.name === name).map((r) => r.version);
        expect(versions, name).toEqual([...versions].sort((x, y) => x - y));
      }
      // Every call committed: none repeated (a repeat would have met the ledger row and not been called).
      expect(calls.length).toBe(expected.size);
    });

    it('keeps the other operations flowing past a handler that throws for one; it retries, dead-letters, and redrive delivers it in order', async () => {
      const schema = 'lib_failing';
      const delivered: string[] = [];
      const attempts = new Map<string, number>();
      let broken = true;
      const ratchet = open({
        pool,
        schema,
        env: { EFFECTS_RETRY_FOR_SECONDS: '1' },
        onChange: (change) => {
          attempts.set(change.id, (attempts.get(change.id) ?? 0) + 1);
          if (broken && change.data.name === 'batches/lib-poison') throw new Error('the app cannot take this one');
          delivered.push(change.id);
        },
      });
      for (const name of ['batches/lib-ok-1', 'batches/lib-poison', 'batches/lib-ok-2'])
        expect((await ratchet.fetch(webhook('http://127.0.0.1', 'batch.succeeded', name))).status).toBe(200);
      const first = await ratchet.tick({ budgetMs: 1_000 });
      expect(first.effects).toBeGreaterThanOrEqual(3);
      expect(delivered.sort()).toEqual(['batches/lib-ok-1#1', 'batches/lib-ok-2#1']);
      // Retried until its window (1 s) ends, then dead-lettered.
      for (let i = 0; i < 30; i++) {
        await ratchet.tick({ budgetMs: 200 });
        const letters = await (
          await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/effects/dead-letters`, { headers: bearer }))
        ).json();
        if ((letters as { deadLetters: unknown[] }).deadLetters.length > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const { deadLetters } = (await (
        await ratchet.fetch(new Request(`http://127.0.0.1${BASE}/effects/dead-letters`, { headers: bearer }))
      ).json()) as { deadLetters: Array<{ idempotencyKey: string; lastError: string }> };
      expect(deadLetters).toMatchObject([
        { idempotencyKey: 'batches/lib-poison#1', lastError: 'onChange threw: the app cannot take this one' },
      ]);
      expect(attempts.get('batches/lib-poison#1')).toBeGreaterThan(1);
      broken = false;
      const redriven = await ratchet.fetch(
        new Request(`http://127.0.0.1${BASE}/effects/redrive`, {
          method: 'POST',
          headers: { ...bearer, 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'batches/lib-poison' }),
        }),
      );
      expect(redriven.status).toBe(200);
      await ratchet.tick({ budgetMs: 1_000 });
      expect(delivered).toContain('batches/lib-poison#1');
      expect(delivered.filter((id) => id === 'batches/lib-poison#1')).toHaveLength(1);
    });

    it('polls each due job once across ticks at once', async () => {
      const gemini = await new FakeGemini().start();
      cleanup.push(() => gemini.stop());
      const schema = 'lib_reconcile';
      const env = { GEMINI_API_KEY: gemini.apiKey, GEMINI_BASE_URL: gemini.baseUrl };
      const a = open({ pool, schema, env });
      const b = open({ pool, schema, env });
      const jobs = Array.from({ length: 12 }, (_, i) => `batches/lib-poll-${i}`);
      for (const job of jobs) {
        gemini.batches.set(job, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T11:00:00Z' });
        await a.client.track(job);
      }
      const [one, two] = await Promise.all([a.tick({ budgetMs: 4_000 }), b.tick({ budgetMs: 4_000 })]);
      expect((one.reconcile?.polled ?? 0) + (two.reconcile?.polled ?? 0)).toBe(jobs.length);
      for (const job of jobs) expect(gemini.requests.filter((r) => r === job).length, job).toBe(1);
      for (const job of jobs) expect((await b.client.get(job))?.state).toBe('SUCCEEDED');
    });
  });

  describe('mounted in a framework, over HTTP', () => {
    async function check(origin: string): Promise<void> {
      const answer = await fetch(webhook(origin, 'batch.succeeded', `batches/lib-http-${origin.split(':').at(-1)}`));
      expect(answer.status).toBe(200);
      const list = await fetch(`${origin}${BASE}/operations`, { headers: bearer });
      expect(list.status).toBe(200);
      expect(JSON.stringify(await list.json())).toContain('batches/lib-http-');
      // The application's own routes are its own.
      expect(await (await fetch(`${origin}/hello`)).text()).toBe('hello');
    }

    it('in a Hono app', async () => {
      const ratchet = open({ dataDir: ':memory:', onChange: () => {} });
      const app = new Hono();
      app.get('/hello', (c) => c.text('hello'));
      app.all(`${BASE}/*`, (c) => ratchet.fetch(c.req.raw));
      const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
      cleanup.push(() => new Promise((done) => server.close(done)));
      await new Promise((resolve) => server.once('listening', resolve));
      const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      await check(origin);
      // The command line reaches a mounted Ratchet as it reaches ratchet start: RATCHET_URL with the prefix.
      const { stdout } = await run(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'redrive', '--list'], {
        cwd: PROJECT_ROOT,
        env: { PATH: process.env.PATH, RATCHET_URL: `${origin}${BASE}`, RATCHET_API_TOKEN: TOKEN },
      });
      expect(stdout).toMatch(/dead letter/i);
    });

    it('behind a body parser (express.json() mounted first), names it as the likely cause', async () => {
      const ratchet = open({ dataDir: ':memory:' });
      const app = express();
      app.use(express.json());
      app.all(`${BASE}/{*path}`, getRequestListener(ratchet.fetch));
      const server = app.listen(0, '127.0.0.1');
      cleanup.push(() => new Promise((done) => server.close(done)));
      await new Promise((resolve) => server.once('listening', resolve));
      const answer = await fetch(
        webhook(`http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'batch.succeeded', 'batches/lib-parsed'),
      );
      expect(answer.status).not.toBe(200);
      expect(((await answer.json()) as { message: string }).message).toMatch(
        /a body parser such as express\.json\(\).*mount Ratchet before any body parser/,
      );
    });

    it('in an Express app, through @hono/node-server, before the body parsers', async () => {
      const ratchet = open({ dataDir: ':memory:' });
      const app = express();
      app.all(`${BASE}/{*path}`, getRequestListener(ratchet.fetch));
      app.use(express.json());
      app.get('/hello', (_req, res) => {
        res.send('hello');
      });
      const server = app.listen(0, '127.0.0.1');
      cleanup.push(() => new Promise((done) => server.close(done)));
      await new Promise((resolve) => server.once('listening', resolve));
      await check(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    });
  });
});
