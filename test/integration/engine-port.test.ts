/**
 * The Engine port (app/engine.ts), held to one suite on every engine behind
 * it, opened by its own factory as the front ends open it: SQLite (a data
 * folder, its effects in this process) and PostgreSQL (a schema of its own).
 * The change feed: every applied write once, in order, the same read in pages
 * of any size from any cursor (fast-check), a waiter woken by a write and one
 * filtered by name only by its operation's. The effects queue: each state
 * change to `onChange` once, in version order per operation, under a shuffled,
 * duplicated storm; a failing change retried while holding its operation's
 * later changes back and letting the others go on; one whose retries ran out
 * dead-lettered, the versions behind it parked, and redrive delivering them in
 * order. And the port's promise while its database is away (SQLite locked by
 * another connection, on a full volume; PostgreSQL restarted, refusing
 * connections), written once: a write refused, within a bound, as the front
 * ends answer 503; health unavailable, then ok; nothing accepted before lost;
 * the same engine writing, reading, feeding changes, history and onChange
 * once it is back, and a delivery the outage cut offered again (what its
 * handler wrote through `sql` committed once); close() not hanging while it
 * is away. (Claims and leases
 * between instances: postgres-effects.test.ts and postgres-faults.test.ts;
 * instances under a storm: e2e/postgres-failover.)
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, readdirSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { OnChange, StateChange } from '../../app/effects/app-sink.ts';
import type { Engine, EngineOptions } from '../../app/engine.ts';
import type { OperationChange } from '../../app/feed.ts';
import { ingest, NotRecordedError } from '../../app/ingest.ts';
import { StoreRejectedError } from '../../app/ports.ts';
import { isTerminal } from '../../core/lifecycle.ts';
import { DEFAULT_OVERDUE_AFTER, overdueMark } from '../../core/overdue.ts';
import type { OperationEvent, OperationRecord } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { openPostgres } from '../../engines/postgres/index.ts';
import { DataFolderError, DB_FILE, openSqlite, Sqlite } from '../../engines/sqlite/index.ts';
import { batchStorm } from '../support/batch-storm.ts';
import { startPostgres, type TestPostgres } from '../support/postgres.ts';
import { eventually } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

interface PortUnderTest {
  label: string;
  open(id: string, options: EngineOptions): Promise<Engine>;
}

const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  // Every step, even after one failed (a volume left mounted is the machine's, not this file's); the first failure after.
  const failures: unknown[] = [];
  for (const step of cleanup.reverse())
    await Promise.resolve()
      .then(step)
      .catch((error: unknown) => failures.push(error));
  if (failures.length > 0) throw failures[0];
});

const PORTS: PortUnderTest[] = [
  {
    label: 'SQLite',
    open: async (_id, options) => {
      const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-port-'));
      cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
      return openSqlite({ ...options, dataDir, inProcess: true });
    },
  },
  {
    label: 'PostgreSQL',
    open: (id, options) =>
      openPostgres({
        ...options,
        url: inject('postgresUrl'),
        schema: `port_${id}_${Date.now().toString(36)}`,
        poolMax: 6,
        migrate: true,
        effectsLeaseMs: 5_000,
      }),
  },
];

/** `name`'s events in order: PENDING → RUNNING → SUCCEEDED (three versions, each a state change). */
const inOrder = (name: string) => batchStorm([name], 0, false);
const storm = batchStorm;

/** An engine with `onChange` and fast retries (a change is retried for `retryForSeconds`, then dead-lettered), started. */
async function started(port: PortUnderTest, id: string, onChange: (change: StateChange) => unknown, retryForSeconds = 60): Promise<Engine> {
  const engine = await port.open(id, {
    work: {
      historyRetentionDays: 30,
      changesRetentionMs: 86_400_000,
      effects: { retry: { baseMs: 20, maxMs: 60, forSeconds: retryForSeconds } },
    },
    trackedExpiryDays: 7,
    logger: silentLogger,
    onChange,
  });
  cleanup.push(() => engine.close(false));
  await engine.start();
  return engine;
}

/** Every change after `after`, read `limit` at a time. */
async function readAll(engine: Engine, limit: number, after: string): Promise<OperationChange[]> {
  const all: OperationChange[] = [];
  let cursor = after;
  for (;;) {
    const page = await engine.changes.next(cursor, {}, limit, 0);
    if (page.changes.length === 0) return all;
    all.push(...page.changes);
    cursor = page.cursor;
  }
}

for (const port of PORTS)
  describe(`the Engine port on ${port.label}`, () => {
    it('delivers each state change to onChange once, in version order per operation, and the feed holds each applied write once, in order', async () => {
      const delivered: string[] = [];
      const engine = await started(port, 'storm', (change) => {
        delivered.push(change.id);
      });
      // The head of an empty feed: reading after it is reading everything.
      const start = await engine.changes.headCursor();
      const names = Array.from({ length: 16 }, (_, i) => `batches/port-${i}`);
      const events = storm(names, 7);
      let next = 0;
      await Promise.all(
        Array.from({ length: 4 }, async () => {
          for (let event = events[next++]; event; event = events[next++]) await ingest(event, { store: engine.store });
        }),
      );
      // Shuffled, an operation may have met its final state first: its versions are what it stored (finished stays finished).
      const versionsOf = new Map<string, number[]>();
      for (const name of names) {
        const record = await engine.store.get(name);
        expect(record?.state).toBe('SUCCEEDED');
        versionsOf.set(
          name,
          Array.from({ length: record?.version ?? 0 }, (_, i) => i + 1),
        );
      }
      const expected = names.flatMap((name) => (versionsOf.get(name) ?? []).map((version) => `${name}#${version}`));
      await eventually(() => new Set(delivered).size === expected.length, 15_000, 'every change delivered');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect([...delivered].sort()).toEqual([...expected].sort()); // once each
      for (const name of names)
        expect(delivered.filter((id) => id.startsWith(`${name}#`))).toEqual((versionsOf.get(name) ?? []).map((v) => `${name}#${v}`));

      // The feed read in pages of any size, from any cursor it handed out, is the same list.
      const whole = await readAll(engine, 1000, start);
      expect(whole.map((c) => `${c.name}#${c.version}`).sort()).toEqual([...expected].sort());
      for (const name of names) expect(whole.filter((c) => c.name === name).map((c) => c.version)).toEqual(versionsOf.get(name));
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: 17 }), fc.integer({ min: 0, max: whole.length - 1 }), async (limit, from) => {
          const rest = await readAll(engine, limit, whole[from]?.cursor ?? start);
          expect(rest.map((c) => c.cursor)).toEqual(whole.slice(from + 1).map((c) => c.cursor));
        }),
        { numRuns: 12 },
      );
    });

    it('wakes a waiter on the feed when a write lands, and one filtered by name only for its operation', async () => {
      const engine = await started(port, 'wake', () => undefined);
      const head = await engine.changes.headCursor();
      const anyWaiter = engine.changes.next(head, {}, 10, 5_000);
      const named = engine.changes.next(head, { name: 'batches/port-wake-b' }, 10, 5_000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const wroteAt = Date.now();
      await ingest(storm(['batches/port-wake-a'], 1)[0] as OperationEvent, { store: engine.store });
      const woken = await anyWaiter;
      expect(Date.now() - wroteAt).toBeLessThan(1_000);
      expect(woken.changes.map((c) => c.name)).toEqual(['batches/port-wake-a']);
      await ingest(storm(['batches/port-wake-b'], 1)[0] as OperationEvent, { store: engine.store });
      expect((await named).changes.map((c) => c.name)).toEqual(['batches/port-wake-b']);
      expect(await engine.changes.versionPast('batches/port-wake-a', 1, 50)).toBe(false);
    });

    it('retries a failing change while holding its operation’s later changes back, and lets the others go on', async () => {
      const delivered: string[] = [];
      let failures = 3;
      const engine = await started(port, 'retry', (change) => {
        if (change.id === 'batches/port-flaky#1' && failures-- > 0) throw new Error('the handler is down');
        delivered.push(change.id);
      });
      for (const event of [...inOrder('batches/port-flaky'), ...inOrder('batches/port-steady')])
        await ingest(event, { store: engine.store });
      await eventually(() => delivered.includes('batches/port-steady#3'), 10_000, 'the steady operation delivered');
      await eventually(() => delivered.includes('batches/port-flaky#3'), 10_000, 'the flaky operation delivered after its retries');
      expect(failures).toBeLessThan(0);
      expect(delivered.filter((id) => id.startsWith('batches/port-flaky#'))).toEqual([
        'batches/port-flaky#1',
        'batches/port-flaky#2',
        'batches/port-flaky#3',
      ]);
      expect(await engine.effects?.retrying()).toEqual([]);
    });

    it('dead-letters a change whose retries ran out, parks the versions behind it, and redrive delivers them in order', async () => {
      const delivered: string[] = [];
      let down = true;
      const engine = await started(
        port,
        'dead',
        (change) => {
          if (down && change.data.name === 'batches/port-dead') throw new Error('the handler refuses it');
          delivered.push(change.id);
        },
        0.2,
      );
      for (const event of inOrder('batches/port-dead')) await ingest(event, { store: engine.store });
      const effects = engine.effects as NonNullable<Engine['effects']>;
      await eventually(async () => (await effects.deadLetters.list()).length === 3, 15_000, 'all three versions dead-lettered or parked');
      const letters = await effects.deadLetters.list();
      expect(letters.map((l) => `${l.name}#${l.version}:${l.reason}`).sort()).toEqual([
        'batches/port-dead#1:retries-exhausted',
        'batches/port-dead#2:waiting-behind',
        'batches/port-dead#3:waiting-behind',
      ]);
      expect(delivered).toEqual([]);
      // /metrics' effect gauges: three dead letters the sink never took, nothing waiting (once the queue has let the last go).
      const backlogIs = (deadLettered: number) =>
        eventually(
          async () => JSON.stringify(await effects.backlog()) === JSON.stringify([{ sink: 'app', pending: 0, retrying: 0, deadLettered }]),
          5_000,
          `the backlog: ${deadLettered} dead-lettered, nothing pending`,
        );
      await backlogIs(3);
      down = false;
      const result = await engine.redrive({ name: 'batches/port-dead' });
      expect(result.redriven).toHaveLength(3);
      await eventually(() => delivered.length === 3, 10_000, 'the redriven versions delivered');
      expect(delivered).toEqual(['batches/port-dead#1', 'batches/port-dead#2', 'batches/port-dead#3']);
      await eventually(async () => (await effects.deadLetters.list()).length === 0, 5_000, 'the dead letters cleared');
      await backlogIs(0);
    });

    it('counts operations by state and kind, with each group’s oldest open one and its open jobs marked overdue, as what was written says (fast-check)', async () => {
      const engine = await started(port, 'counts', () => {});
      const written = new Map<string, OperationRecord>();
      const STATES = ['PENDING', 'RUNNING', 'REQUIRES_ACTION', 'SUCCEEDED', 'FAILED'] as const;
      let run = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.array(
            fc.record({
              op: fc.integer({ min: 0, max: 5 }),
              kind: fc.constantFrom('batch', 'interaction'),
              state: fc.constantFrom(...STATES),
              markOverdue: fc.boolean(),
            }),
            { minLength: 1, maxLength: 25 },
          ),
          async (steps) => {
            run++;
            for (const [i, { op, kind, state, markOverdue }] of steps.entries()) {
              const name = `${kind === 'batch' ? 'batches' : 'interactions'}/counts-${run}-${op}`;
              const event: OperationEvent = {
                name,
                kind,
                state,
                providerState: state,
                source: 'webhook',
                eventId: `${name}-${i}`,
                updateTime: normalizeTime(`2026-12-06T00:00:${String(i).padStart(2, '0')}Z`),
              };
              const result = await ingest(event, { store: engine.store });
              let record = result.record;
              // Marked as reconcile marks it (once, on its version), whatever its age: the counts read the mark's index.
              const mark = markOverdue
                ? overdueMark(record, { ...DEFAULT_OVERDUE_AFTER, [kind]: 0.001 }, normalizeTime('2027-01-01T00:00:00Z'))
                : undefined;
              if (mark && (await engine.store.write(mark, record.version)).ok) record = mark;
              const known = written.get(name);
              if (!known || record.version > known.version) written.set(name, record);
            }
            const model = new Map<
              string,
              { state: string | null; kind: string; count: number; overdue: number; oldestOpenSince: string | null }
            >();
            for (const record of written.values()) {
              const key = `${record.state}|${record.kind}`;
              const group = model.get(key) ?? { state: record.state, kind: record.kind, count: 0, overdue: 0, oldestOpenSince: null };
              group.count++;
              if (!isTerminal(record.state) && record.overdue) group.overdue++;
              if (!isTerminal(record.state) && (group.oldestOpenSince === null || record.createdAt < group.oldestOpenSince))
                group.oldestOpenSince = record.createdAt;
              model.set(key, group);
            }
            const byKey = (rows: Array<{ state: string | null; kind: string }>) =>
              [...rows].sort((a, b) => `${a.state}|${a.kind}`.localeCompare(`${b.state}|${b.kind}`));
            expect(byKey(await engine.store.counts())).toEqual(byKey([...model.values()]));
          },
        ),
        { numRuns: 15 },
      );
    });
  });

/**
 * One way an engine's database goes away and comes back, under an engine
 * opened on it: `open` gives the engine, started, and the switches.
 */
interface Outage {
  label: string;
  /** Why it cannot run here (it needs what this machine does not allow); undefined: it runs. */
  cannot?: string;
  open(options: EngineOptions): Promise<{ engine: Engine; away(): Promise<void>; back(): Promise<void>; written?: Written }>;
}

/**
 * Where `onChange` writes through its `sql` (PostgreSQL: in the transaction that records the delivery), and what it
 * wrote: what committed with each delivery's record, exactly once per change whatever the outage cut.
 */
interface Written {
  table: string;
  read(): Promise<string[]>;
}

/** How long anything may take to answer while the database is away: the busy timeout (SQLite), the statement and connect timeouts (PostgreSQL, below), and room for a loaded machine. */
const AWAY_BOUND_MS = 3_000;
/** The PostgreSQL engines here give up on a statement or a connection after this (DATABASE_STATEMENT_TIMEOUT_MS, 5 s by default). */
const PG_TIMEOUTS = { statementTimeoutMs: 1_000, connectTimeoutMs: 1_000 };

/** A data folder of this test's own, removed after. */
function dataFolder(under = tmpdir()): string {
  const dataDir = mkdtempSync(join(under, 'ratchet-port-'));
  cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
  return dataDir;
}

/** A tmpfs volume of `size`, unmounted after; undefined where this process may not mount one (not root, no CAP_SYS_ADMIN). */
function smallVolume(size: string): string | undefined {
  const volume = mkdtempSync(join(tmpdir(), 'ratchet-volume-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', volume], { stdio: 'ignore' });
  } catch {
    rmSync(volume, { recursive: true, force: true });
    return undefined;
  }
  cleanup.push(() => {
    // Lazily: a closed engine's SQLite file stays open until its prepared statements are garbage-collected (libsql).
    execFileSync('umount', ['--lazy', volume]);
    rmSync(volume, { recursive: true, force: true });
  });
  return volume;
}

/** Fills `volume` to its last byte with one file (ENOSPC); the file's path, to remove. */
function fill(volume: string): string {
  const filler = join(volume, 'filler');
  const fd = openSync(filler, 'w');
  try {
    const chunk = Buffer.alloc(64 * 1024);
    for (;;) writeSync(fd, chunk); // a short write once the volume is nearly full, ENOSPC at the next
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
  return filler;
}

const mountable = (() => {
  const probe = smallVolume('64k');
  return probe !== undefined;
})();

/** PostgreSQL of this file's own (the other tests' server is never stopped), started once, for the outages below. */
let ownServer: TestPostgres | undefined;
async function ownPostgres(): Promise<TestPostgres> {
  if (!ownServer) {
    ownServer = await startPostgres();
    const server = ownServer;
    cleanup.push(() => server.stop());
  }
  return ownServer;
}

/** An engine on `url`'s database, in a schema of its own, started, with a table there for `onChange` to write to. */
async function startedPostgres(url: string, id: string, options: EngineOptions): Promise<{ engine: Engine; written: Written }> {
  const schema = `port_${id}_${Date.now().toString(36)}`;
  const engine = await openPostgres({
    ...options,
    url,
    schema,
    poolMax: 4,
    migrate: true,
    effectsLeaseMs: 5_000,
    timeouts: PG_TIMEOUTS,
  });
  await engine.start();
  // No key: a second commit of one change would be a second row.
  const table = `${schema}.handled`;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`CREATE TABLE ${table} (id text NOT NULL)`);
  } finally {
    await client.end();
  }
  const read = async () => {
    const reader = new pg.Client({ connectionString: url });
    await reader.connect();
    try {
      return (await reader.query<{ id: string }>(`SELECT id FROM ${table}`)).rows.map((row) => row.id);
    } finally {
      await reader.end();
    }
  };
  return { engine, written: { table, read } };
}

const OUTAGES: Array<{ port: string; outages: Outage[] }> = [
  {
    port: 'SQLite',
    outages: [
      {
        label: 'locked: another connection holds the write lock far past the busy timeout',
        open: async (options) => {
          const dataDir = dataFolder();
          const engine = openSqlite({ ...options, dataDir, inProcess: true });
          await engine.start();
          let holder: Sqlite | undefined;
          return {
            engine,
            away: async () => {
              // An operator's sqlite3 shell in a write transaction, as long as the test wants.
              holder = Sqlite.open(join(dataDir, DB_FILE), { plain: true });
              holder.connection.exec('BEGIN IMMEDIATE');
            },
            back: async () => {
              holder?.connection.exec('ROLLBACK');
              holder?.close();
            },
          };
        },
      },
      {
        label: 'on a full volume (a real tmpfs, filled to its last byte)',
        cannot: mountable ? undefined : 'this process may not mount a tmpfs (it takes root)',
        open: async (options) => {
          const volume = smallVolume('8m') as string;
          const engine = openSqlite({ ...options, dataDir: dataFolder(volume), inProcess: true });
          await engine.start();
          let filler: string | undefined;
          return {
            engine,
            away: async () => {
              filler = fill(volume);
            },
            back: async () => {
              if (filler) rmSync(filler);
            },
          };
        },
      },
    ],
  },
  {
    port: 'PostgreSQL',
    outages: [
      {
        label: 'restarted: the server stopped (fast, as a restart or a failover stops it), then started again',
        cannot: process.env.RATCHET_TEST_DATABASE_URL ? 'RATCHET_TEST_DATABASE_URL names a server the tests cannot restart' : undefined,
        open: async (options) => {
          const server = await ownPostgres();
          const { engine, written } = await startedPostgres(server.url, 'restarted', options);
          return { engine, written, away: () => server.halt('fast'), back: () => server.resume() };
        },
      },
      {
        label: 'refusing connections: its role over its connection limit (53300), the connections it had cut',
        open: async (options) => {
          const server = await ownPostgres();
          const admin = new pg.Client({ connectionString: server.url });
          await admin.connect();
          cleanup.push(() => admin.end());
          const role = `port_refused_${Date.now().toString(36)}`;
          // Not a superuser: a role's connection limit does not bind one.
          await admin.query(`CREATE ROLE ${role} LOGIN; GRANT CREATE ON DATABASE postgres TO ${role}`);
          const url = new URL(server.url);
          url.username = role;
          const { engine, written } = await startedPostgres(url.href, 'refusing', options);
          return {
            engine,
            written,
            away: async () => {
              await admin.query(`ALTER ROLE ${role} CONNECTION LIMIT 0`);
              await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [role]);
            },
            back: async () => {
              await admin.query(`ALTER ROLE ${role} CONNECTION LIMIT -1`);
            },
          };
        },
      },
    ],
  },
];

/** What `promise` came to within `ms`; a failed test if it had not settled by then (a hang). */
async function settledWithin<T>(ms: number, what: string, promise: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not settled within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      ),
      late,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const faultOptions = (onChange: OnChange): EngineOptions => ({
  work: {
    historyRetentionDays: 30,
    changesRetentionMs: 86_400_000,
    effects: { retry: { baseMs: 20, maxMs: 200, forSeconds: 600 } },
  },
  trackedExpiryDays: 7,
  logger: silentLogger,
  onChange,
});

for (const { port, outages } of OUTAGES)
  for (const outage of outages)
    describe.skipIf(outage.cannot)(`the Engine port on ${port} while its database is ${outage.label}`, () => {
      it('refuses a write as the front ends answer 503, within a bound; says unavailable; loses nothing; and the same engine carries on once it is back', async () => {
        const delivered: string[] = [];
        let table: string | undefined;
        // The outage cuts a delivery every time: the handler's first run for before-outage#2 has written (through
        // `sql`, where there is one) and returns only once the database is away, before its record is written.
        const CUT = 'batches/before-outage#2';
        let cut = () => {};
        const outageBegun = new Promise<void>((resolve) => {
          cut = resolve;
        });
        cleanup.push(async () => cut());
        const { engine, away, back, written } = await outage.open(
          faultOptions(async (change, { sql }) => {
            delivered.push(change.id);
            if (sql && table) await sql(`INSERT INTO ${table} (id) VALUES ($1)`, [change.id]);
            if (change.id === CUT && delivered.indexOf(CUT) === delivered.length - 1) await outageBegun;
          }),
        );
        table = written?.table;
        cleanup.push(() => engine.close(false));
        const start = await engine.changes.headCursor();
        for (const event of inOrder('batches/before-outage')) await ingest(event, { store: engine.store });
        expect(await engine.health()).toBe('ok');
        const beforeOutage = await engine.changes.headCursor();
        await eventually(() => delivered.includes(CUT), 10_000, `${CUT}'s delivery to begin`);

        await away();
        cut();
        try {
          const [during] = inOrder('batches/during-outage') as [OperationEvent];
          const refused = await settledWithin(AWAY_BOUND_MS, 'a write while away', ingest(during, { store: engine.store }));
          // Never as if written: NotRecordedError is the webhook's 503 with Retry-After (a StoreRejectedError would be a 4xx).
          expect(refused).toEqual({ error: expect.any(NotRecordedError) });
          const cause = ((refused as { error: NotRecordedError }).error.cause ?? {}) as Error;
          expect(cause).not.toBeInstanceOf(StoreRejectedError);
          // The engine's own write, as the other routes make it: the same error, never an answer.
          const direct = await settledWithin(AWAY_BOUND_MS, 'store.apply while away', engine.store.apply(during, during.updateTime ?? ''));
          expect(direct).toEqual({ error: expect.anything() });
          expect((direct as { error: unknown }).error).not.toBeInstanceOf(StoreRejectedError);
          // The probe answers at most once a second (SQLite): unavailable within the bound, each answer itself bounded.
          await eventually(
            async () => {
              const health = await settledWithin(AWAY_BOUND_MS, 'health() while away', engine.health());
              return 'value' in health && typeof health.value === 'object' && typeof health.value.unavailable === 'string';
            },
            AWAY_BOUND_MS,
            'health() to say unavailable',
          );
        } finally {
          await back();
        }

        await eventually(async () => (await engine.health()) === 'ok', 10_000, 'health() to say ok again');
        // The same engine object, never reopened: the first write once it says ok is taken.
        const after = inOrder('batches/after-outage');
        for (const event of after) expect((await ingest(event, { store: engine.store })).outcome).toBe('applied');
        expect((await engine.store.get('batches/after-outage'))?.version).toBe(3);
        // Nothing accepted before is lost.
        expect(await engine.store.get('batches/before-outage')).toMatchObject({ state: 'SUCCEEDED', version: 3 });
        // The feed goes on from a cursor handed out before: the writes after, nothing of the refused one.
        expect((await readAll(engine, 100, beforeOutage)).map((c) => `${c.name}#${c.version}`)).toEqual([
          'batches/after-outage#1',
          'batches/after-outage#2',
          'batches/after-outage#3',
        ]);
        expect((await readAll(engine, 100, start)).map((c) => `${c.name}#${c.version}`)).toHaveLength(6);
        // History (SQLite derives it from the outbox a moment later), each change once.
        for (const name of ['batches/before-outage', 'batches/after-outage'])
          await eventually(async () => (await engine.history.list(name)).length === 3, 10_000, `${name}'s history`);
        // onChange: every change, in version order per job. What the handler does outside a transaction is at least
        // once (docs/apps.md): a delivery the outage cut after the handler ran, before its record was written, is
        // offered again, the same change, before the next version. So a change may come twice here only if it was
        // written before the outage; what the handler writes through `sql` commits with the record, once.
        const expected = ['before-outage', 'after-outage'].flatMap((n) => [1, 2, 3].map((v) => `batches/${n}#${v}`));
        await eventually(() => expected.every((id) => delivered.includes(id)), 15_000, 'every change to onChange');
        await new Promise((resolve) => setTimeout(resolve, 200));
        for (const name of ['batches/before-outage', 'batches/after-outage']) {
          const versions = delivered.filter((id) => id.startsWith(`${name}#`)).map((id) => Number(id.split('#')[1]));
          expect(
            versions.filter((version, i) => version !== versions[i - 1]),
            `${name}: ${versions}`,
          ).toEqual([1, 2, 3]);
        }
        const twice = delivered.filter((id, i) => delivered.indexOf(id) !== i);
        expect(twice.filter((id) => !id.startsWith('batches/before-outage#'))).toEqual([]);
        if (written) {
          // The cut delivery's transaction never committed: it was offered again, and its `sql` write stayed once.
          expect(twice).toContain(CUT);
          expect((await written.read()).sort()).toEqual([...expected].sort());
        }
        expect(await engine.store.get('batches/during-outage')).toBeUndefined();
      });

      it('closes within a bound while the database is away', async () => {
        const { engine, away, back } = await outage.open(faultOptions(() => undefined));
        for (const event of inOrder('batches/before-close')) await ingest(event, { store: engine.store });
        await away();
        try {
          expect(await settledWithin(AWAY_BOUND_MS, 'close() while away', engine.close(false))).toEqual({ value: undefined });
        } finally {
          await back();
        }
      });
    });

/**
 * A data folder that was written, then made read-only, as a real user meets
 * it: the volume mounted read-only (a bind mount, as root), else the folder
 * and its files without write permission.
 */
function readOnlyFolder(dataDir: string): string {
  if (mountable) {
    const view = mkdtempSync(join(tmpdir(), 'ratchet-read-only-'));
    execFileSync('mount', ['--bind', dataDir, view]);
    execFileSync('mount', ['-o', 'remount,ro,bind', view]);
    cleanup.push(() => {
      execFileSync('umount', ['--lazy', view]);
      rmSync(view, { recursive: true, force: true });
    });
    return view;
  }
  for (const name of readdirSync(dataDir)) chmodSync(join(dataDir, name), 0o400);
  chmodSync(dataDir, 0o500);
  cleanup.push(() => chmodSync(dataDir, 0o700)); // so that it can be removed
  return dataDir;
}

describe('the SQLite factory on a read-only data folder', () => {
  // Root writes through permissions: only a read-only mount is read-only to it.
  it.skipIf(!mountable && process.getuid?.() === 0)(
    'refuses to open with one line naming the folder (DataFolderError: `ratchet start` prints it and exits 1)',
    async () => {
      const dataDir = dataFolder();
      const first = openSqlite({ ...faultOptions(() => undefined), dataDir, inProcess: true });
      await first.start();
      await ingest(inOrder('batches/before-read-only')[0] as OperationEvent, { store: first.store });
      await first.close(false);
      chmodSync(dataDir, 0o755); // as an older version or the operator left it: opening would tighten it, and cannot
      const folder = readOnlyFolder(dataDir);
      let refusal: unknown;
      try {
        const engine = openSqlite({ ...faultOptions(() => undefined), dataDir: folder, inProcess: true });
        cleanup.push(() => engine.close(false));
      } catch (error) {
        refusal = error;
      }
      expect(refusal).toBeInstanceOf(DataFolderError);
      expect((refusal as Error).message).toMatch(
        new RegExp(`^DATA_DIR ${folder} cannot be written \\((a read-only file system|permission denied): ${folder}`),
      );
      expect((refusal as Error).message).not.toMatch(/\n/);
    },
  );
});
