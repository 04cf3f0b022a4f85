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
 * order. (Claims and leases between instances: postgres-effects.test.ts and
 * postgres-faults.test.ts; the database going away: e2e/postgres-failover.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { StateChange } from '../../app/effects/app-sink.ts';
import type { Engine, EngineOptions } from '../../app/engine.ts';
import type { OperationChange } from '../../app/feed.ts';
import { ingest } from '../../app/ingest.ts';
import { isTerminal } from '../../core/lifecycle.ts';
import { DEFAULT_OVERDUE_AFTER, overdueMark } from '../../core/overdue.ts';
import type { OperationEvent, OperationRecord } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { openPostgres } from '../../engines/postgres/index.ts';
import { openSqlite } from '../../engines/sqlite/index.ts';
import { batchStorm } from '../support/batch-storm.ts';
import { eventually } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

interface PortUnderTest {
  label: string;
  open(id: string, options: EngineOptions): Promise<Engine>;
}

const cleanup: Array<() => unknown> = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
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
