/**
 * PostgreSQL going away under two `ratchet start` instances mid-storm, as
 * managed databases do: a crash (immediate stop) and a restart or failover
 * (fast stop, 4 s down), PgBouncer restarted in front of it, and a write
 * transaction of another application's held open in another schema through
 * the whole storm. Each time: no instance exits, no acknowledged delivery is
 * lost, every final effect arrives within 5 s of the database's return (or
 * of the storm's end, when that is later), each once and in version order, a
 * waiter on the change feed is woken within a second of a commit, and the
 * feed is the same from both instances. Inside an app (createRatchet, under
 * `start()` and under `tick()`), a crash of the server leaves the host
 * process up and each change reaches `onChange` once. The server is this
 * file's own (the other tests' is never stopped).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRatchet } from '../../local/library.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { PGBOUNCER, startPgBouncer, type TestPgBouncer } from '../support/pgbouncer.ts';
import { startPostgres, type TestPostgres } from '../support/postgres.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { Receiver } from '../support/receiver.ts';
import { stormAndCheck } from '../support/storm.ts';

const inbound = newSecret();
const outbound = newSecret();
const OPERATIONS = 30;
const WORKERS = 6;
let server: TestPostgres;
let receiver: Receiver;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  server = await startPostgres();
  receiver = await new Receiver(outbound).start();
}, 60_000);
afterAll(async () => {
  await receiver?.stop();
  await server?.stop();
});

const startInstance = (url: string, schema: string) =>
  startRatchet({
    DATABASE_URL: url,
    DATABASE_SCHEMA: schema,
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_RETRY_BASE_MS: '100',
    EFFECTS_RETRY_MAX_MS: '500',
  });

/** Both instances still running: none exited on what the database did. */
function expectAlive(front: RatchetProcess[]): void {
  for (const instance of front) expect(instance.child.exitCode, instance.output().slice(-2_000)).toBeNull();
}

/** A long poll on one instance's feed, woken by a webhook sent to the other: how long from the acknowledgement to the wake-up. */
async function wakeUpMs(front: RatchetProcess[], name: string): Promise<number> {
  const [waiter, writer] = front as [RatchetProcess, RatchetProcess];
  const head = ((await (await waiter.api('/changes?limit=1')).json()) as { cursor: string }).cursor;
  const woken = waiter.api(`/changes?after=${head}&wait=10`).then(async (response) => ({
    at: Date.now(),
    changes: ((await response.json()) as { changes: Array<{ name: string }> }).changes,
  }));
  await sleep(300);
  const { body, headers } = signedDelivery(inbound, envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:01Z'));
  expect((await fetch(`${writer.url}/webhooks/gemini`, { method: 'POST', body, headers })).status).toBe(200);
  const acknowledged = Date.now();
  const { at, changes } = await woken;
  expect(changes.map((c) => c.name)).toEqual([name]);
  return at - acknowledged;
}

describe('two instances while PostgreSQL goes away and comes back', () => {
  const front: RatchetProcess[] = [];
  beforeAll(async () => {
    const schema = `rt_failover_${Date.now().toString(36)}`;
    front.push(await startInstance(server.url, schema));
    front.push(await startInstance(server.url, schema));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(front.map((instance) => instance.stop()));
  });

  for (const [fault, mode, downMs] of [
    ['a crash (immediate stop), back 1 s later', 'immediate', 1_000],
    ['a restart or failover (fast stop), down 4 s', 'fast', 4_000],
  ] as const)
    it(`${fault}: none exits, nothing lost, every final effect within 5 s of its return, waits woken`, { timeout: 120_000 }, async () => {
      let backAt = Number.NaN;
      const outcome = await stormAndCheck({
        front,
        receiver,
        secret: inbound,
        prefix: `down-${mode}`,
        operations: OPERATIONS,
        workers: WORKERS,
        midway: async () => {
          await server.halt(mode);
          await sleep(downMs);
          await server.resume();
          backAt = Date.now();
        },
      });
      expectAlive(front);
      expect(outcome.resent).toBeGreaterThan(0);
      const lag = outcome.lastEffectAt - Math.max(backAt, outcome.acknowledgedAt);
      console.log(`${fault}: last final effect ${lag} ms after the database's return or the storm's end`);
      expect(lag).toBeLessThan(5_000);
      expect(await wakeUpMs(front, `interactions/woken-${mode}`)).toBeLessThan(1_000);
    });

  it('an application’s write transaction held open in another schema through the storm holds nothing back', {
    timeout: 120_000,
  }, async () => {
    const app = new pg.Client({ connectionString: server.url, application_name: 'nightly-import' });
    await app.connect();
    try {
      await app.query('CREATE SCHEMA IF NOT EXISTS app_imports; CREATE TABLE IF NOT EXISTS app_imports.rows (id serial, body text)');
      await app.query('BEGIN');
      await app.query("INSERT INTO app_imports.rows (body) VALUES ('the nightly import')");
      const outcome = await stormAndCheck({
        front,
        receiver,
        secret: inbound,
        prefix: 'beside-import',
        operations: OPERATIONS,
        workers: WORKERS,
        effectsWithinMs: 5_000,
      });
      expect(outcome.lastEffectAt - outcome.acknowledgedAt).toBeLessThan(5_000);
      expect(await wakeUpMs(front, 'interactions/woken-beside-import')).toBeLessThan(1_000);
      // Still open: nothing waited for it to end.
      expect((await app.query('SELECT count(*)::int AS n FROM app_imports.rows')).rows[0]).toEqual({ n: 1 });
    } finally {
      await app.query('ROLLBACK').catch(() => undefined);
      await app.end();
    }
    expectAlive(front);
  });
});

describe('a server that refuses more clients (53300)', () => {
  it('answers webhooks and reads 503 with Retry-After, /healthz says so, and all is back once a connection is free', {
    timeout: 60_000,
  }, async () => {
    const admin = new pg.Pool({ connectionString: server.url, max: 1 });
    admin.on('error', () => undefined);
    const limited = new URL(server.url);
    limited.username = 'ratchet_limited';
    // Not a superuser: a role's connection limit does not bind one.
    await admin.query('CREATE ROLE ratchet_limited LOGIN CONNECTION LIMIT 2; GRANT CREATE ON DATABASE postgres TO ratchet_limited');
    // One pool connection and the LISTEN one: the role's two.
    const instance = await startRatchet({
      DATABASE_URL: limited.href,
      DATABASE_SCHEMA: 'rt_limited',
      DATABASE_POOL_MAX: '1',
      WEBHOOK_SIGNING_SECRETS: inbound,
    });
    const squatter = new pg.Client({ connectionString: limited.href });
    try {
      const send = async (name: string) => {
        const { body, headers } = signedDelivery(inbound, envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:01Z'));
        return fetch(`${instance.url}/webhooks/gemini`, { method: 'POST', body, headers });
      };
      expect((await send('interactions/limited-before')).status).toBe(200);
      // Another client of the role takes the pool's place, then the pool's connection is cut: Ratchet's next connect
      // is refused. The squatter connects first, under a limit raised for it and lowered again (a limit binds only new
      // connections): connecting after the cut, it raced Ratchet's own reconnect (a chore's, a request's) for the
      // freed slot, and lost it now and then on a loaded machine (too many connections for role, thrown here).
      await admin.query('ALTER ROLE ratchet_limited CONNECTION LIMIT 3');
      await squatter.connect();
      await admin.query('ALTER ROLE ratchet_limited CONNECTION LIMIT 2');
      await admin.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'ratchet_limited' AND application_name = 'ratchet'",
      );
      // Ratchet reconnecting at once, before anything else (the order the old test lost): refused too.
      expect((await fetch(`${instance.url}/healthz`)).status).toBe(503);
      const refused = await send('interactions/limited-during');
      expect(refused.status).toBe(503);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      const read = await instance.api('/operations/interactions/limited-before');
      expect(read.status).toBe(503);
      expect(Number(read.headers.get('retry-after'))).toBeGreaterThan(0);
      // Every read a client or the console makes: 503 with Retry-After, never a 500.
      for (const path of ['/changes?limit=1', '/operations?limit=1', '/']) {
        const answer = await instance.api(path, { headers: { accept: 'text/html' } });
        expect(answer.status, path).toBe(503);
        expect(Number(answer.headers.get('retry-after')), path).toBeGreaterThan(0);
      }
      const health = await fetch(`${instance.url}/healthz`);
      expect(health.status).toBe(503);
      expect(await health.json()).toMatchObject({
        status: 'degraded',
        store: 'unavailable',
        reason: expect.stringMatching(/too many connections/),
      });
      await squatter.end();
      const backAt = Date.now();
      let status = 0;
      while (status !== 200 && Date.now() - backAt < 2_000) status = (await send('interactions/limited-after')).status;
      expect(status).toBe(200);
      expect(instance.child.exitCode).toBeNull();
    } finally {
      await squatter.end().catch(() => undefined);
      await instance.stop();
      await admin.end();
    }
  });
});

describe.skipIf(!PGBOUNCER && !process.env.CI)('two instances through PgBouncer, restarted mid-storm', () => {
  const front: RatchetProcess[] = [];
  let bouncer: TestPgBouncer;
  beforeAll(async () => {
    bouncer = await startPgBouncer(server.url, 4);
    const schema = `rt_failover_bouncer_${Date.now().toString(36)}`;
    front.push(await startInstance(bouncer.url, schema));
    front.push(await startInstance(bouncer.url, schema));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(front.map((instance) => instance.stop()));
    await bouncer?.stop();
  });

  it('none exits, nothing lost, every final effect within 5 s of its return, waits woken', { timeout: 120_000 }, async () => {
    let backAt = Number.NaN;
    const outcome = await stormAndCheck({
      front,
      receiver,
      secret: inbound,
      prefix: 'bouncer-restart',
      operations: OPERATIONS,
      workers: WORKERS,
      midway: async () => {
        await bouncer.restart(1_000);
        backAt = Date.now();
      },
    });
    expectAlive(front);
    const lag = outcome.lastEffectAt - Math.max(backAt, outcome.acknowledgedAt);
    console.log(`PgBouncer restart: last final effect ${lag} ms after its return or the storm's end`);
    expect(lag).toBeLessThan(5_000);
    expect(await wakeUpMs(front, 'interactions/woken-bouncer')).toBeLessThan(1_000);
  });
});

describe('inside an app (createRatchet) while PostgreSQL restarts', () => {
  const TOKEN = 'failover-library-token-0123456789abcdef';
  for (const mode of ['start', 'tick'] as const)
    it(`under ${mode}(): the host process goes on, and each change reaches onChange once, in order`, { timeout: 120_000 }, async () => {
      const schema = `rt_failover_lib_${mode}`;
      const seen = `app_seen_${mode}`;
      const admin = new pg.Pool({ connectionString: server.url, max: 1 });
      // The test's own idle connection is cut by the crash too: not this test's subject.
      admin.on('error', () => undefined);
      await admin.query(`CREATE TABLE IF NOT EXISTS ${seen} (id text NOT NULL, name text NOT NULL, version int NOT NULL, at serial)`);
      const ratchet = createRatchet({
        databaseUrl: server.url,
        schema,
        webhookSigningSecrets: inbound,
        apiToken: TOKEN,
        onChange: async (change, { sql }) => {
          await sql?.(`INSERT INTO ${seen} (id, name, version) VALUES ($1, $2, $3)`, [change.id, change.data.name, change.data.version]);
        },
        env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL', EFFECTS_RETRY_BASE_MS: '50', EFFECTS_RETRY_MAX_MS: '200' },
      });
      const tickErrors: number[] = [];
      let resumedAt = Number.NaN;
      let ticking = mode === 'tick';
      const ticks = (async () => {
        while (ticking) {
          await ratchet.tick({ budgetMs: 300 }).catch(() => tickErrors.push(Date.now()));
          await sleep(100);
        }
      })();
      try {
        if (mode === 'start') await ratchet.start();
        const names = Array.from({ length: 12 }, (_, i) => `interactions/lib-${mode}-${i}`);
        const send = async (type: string, name: string, at: string) => {
          const { body, headers } = signedDelivery(inbound, envelope(type, { id: name }, at), { id: `${name}:${type}` });
          for (;;) {
            const answer = await ratchet.fetch(new Request('http://127.0.0.1/webhooks/gemini', { method: 'POST', body, headers }));
            if (answer.status === 200) return;
            expect(answer.status).toBe(503);
            await sleep(50);
          }
        };
        const storm = Promise.all(
          names.map(async (name, i) => {
            await sleep(i * 120);
            await send('interaction.requires_action', name, '2026-11-30T10:00:01Z');
            await send('interaction.completed', name, '2026-11-30T10:00:03Z');
          }),
        );
        await sleep(400);
        await server.halt('immediate');
        await sleep(1_000);
        await server.resume();
        resumedAt = Date.now();
        await storm;
        const expected = names.flatMap((name) => [`${name}#1`, `${name}#2`]);
        const rows = async () =>
          (await admin.query<{ id: string; name: string; version: number }>(`SELECT id, name, version FROM ${seen} ORDER BY at`)).rows;
        const until = Date.now() + 15_000;
        while ((await rows()).length < expected.length && Date.now() < until) await sleep(200);
        const written = await rows();
        expect(written.map((r) => r.id).sort()).toEqual(expected.sort());
        for (const name of names) expect(written.filter((r) => r.name === name).map((r) => r.version)).toEqual([1, 2]);
        // A tick while the database was away rejected (the app's own await hears why); within 2 s of its return they work again.
        for (const at of tickErrors) expect(at).toBeLessThan(resumedAt + 2_000);
      } finally {
        ticking = false;
        await ticks;
        await ratchet.close();
        await admin.end();
      }
    });
});
