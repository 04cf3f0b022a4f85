/**
 * What the PostgreSQL engine holds beyond the conformance suite (which it
 * passes as every engine does): migrations when instances start together, a
 * newer schema refused, a schema a start may not migrate; the change log read
 * by cursor while three instances write (gap-free, the same as read after,
 * each operation in version order); and the engine through PgBouncer in
 * transaction mode, where no connection keeps anything between transactions.
 */
import fc from 'fast-check';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ingest, RecentRecords } from '../../app/ingest.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { changesAfter, type LoggedChange } from '../../engines/postgres/change-log.ts';
import { connect } from '../../engines/postgres/database.ts';
import { openPostgresEngine, type PostgresEngine } from '../../engines/postgres/index.ts';
import { SCHEMA_VERSION, SchemaError, schemaVersionOf } from '../../engines/postgres/schema.ts';
import { batchStorm } from '../support/batch-storm.ts';
import { PGBOUNCER, startPgBouncer } from '../support/pgbouncer.ts';

const url = inject('postgresUrl');
const opened: PostgresEngine[] = [];
let schemas = 0;
const freshSchema = () => `rt_${Date.now().toString(36)}_${++schemas}`;
const open = async (options: Partial<Parameters<typeof openPostgresEngine>[0]> & { schema: string }) => {
  const engine = await openPostgresEngine({ url, historyRetentionDays: 30, ...options });
  opened.push(engine);
  return engine;
};
afterAll(async () => {
  for (const engine of opened) await engine.close();
});

const storm = (names: string[], seed: number) => batchStorm(names, seed);

async function readAll(engine: PostgresEngine, cursor?: string): Promise<LoggedChange[]> {
  const all: LoggedChange[] = [];
  for (;;) {
    const page = await changesAfter(engine.db, cursor, 7);
    if (page.changes.length === 0) return all;
    all.push(...page.changes);
    cursor = page.cursor;
  }
}

describe('the PostgreSQL engine', () => {
  it('migrates once when four instances start together on an empty schema, and starts at once when it is current', async () => {
    const schema = freshSchema();
    const engines = await Promise.all(Array.from({ length: 4 }, () => open({ schema })));
    expect(await schemaVersionOf((engines[0] as PostgresEngine).db)).toBe(SCHEMA_VERSION);
    const tables = await (engines[0] as PostgresEngine).db.rows<{ table_name: string }>(
      'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
      [schema],
    );
    expect(tables.map((t) => t.table_name)).toEqual([
      'changes',
      'dead_letters',
      'decisions',
      'effect_ledger',
      'effects',
      'history',
      'leases',
      'meta',
      'notes',
      'operations',
      'sign_ins',
      'unprocessable',
    ]);
    await open({ schema, migrate: false });
  });

  it('refuses a schema migrated by a newer Ratchet, and changes nothing in it', async () => {
    const schema = freshSchema();
    const engine = await open({ schema });
    await engine.db.run("UPDATE {s}.meta SET value = '99' WHERE key = 'schema_version'");
    await expect(open({ schema })).rejects.toThrow(
      new SchemaError(
        `schema "${schema}" has version 99, migrated by a newer Ratchet (this one knows up to ${SCHEMA_VERSION}); run that version, or set DATABASE_SCHEMA to another schema`,
      ),
    );
    expect(await schemaVersionOf(engine.db)).toBe(99);
  });

  it('refuses to start without migrating a schema that is behind, when told not to migrate', async () => {
    const schema = freshSchema();
    await expect(open({ schema, migrate: false })).rejects.toThrow(/is at version 0, this Ratchet needs \d+: run ratchet migrate/);
    const db = connect({ url, schema });
    expect(await schemaVersionOf(db)).toBe(0);
    await db.close();
  });

  it('reads one change log from any instance while three write: gap-free by cursor, the same as read after, each operation in version order', async () => {
    const schema = freshSchema();
    const instances = await Promise.all([open({ schema }), open({ schema }), open({ schema })]);
    const names = Array.from({ length: 40 }, (_, i) => `batches/feed-${i}`);
    const events = storm(names, 11);
    const seen: LoggedChange[] = [];
    let cursor: string | undefined;
    let writing = true;
    // A reader on a fourth pool, following the log page by page while the writes go on.
    const reader = open({ schema }).then(async (engine) => {
      while (writing) {
        const page = await changesAfter(engine.db, cursor, 5);
        seen.push(...page.changes);
        cursor = page.cursor;
        if (page.changes.length === 0) await new Promise((resolve) => setTimeout(resolve, 2));
      }
      seen.push(...(await readAll(engine, cursor)));
    });
    let next = 0;
    await Promise.all(
      instances.flatMap((instance) =>
        Array.from({ length: 4 }, async () => {
          for (let event = events[next++]; event; event = events[next++]) await ingest(event, { store: instance.store });
        }),
      ),
    );
    writing = false;
    await reader;
    const after = await readAll(instances[2] as PostgresEngine);
    expect(seen.map((c) => c.cursor)).toEqual(after.map((c) => c.cursor));
    for (const name of names) {
      const record = await (instances[0] as PostgresEngine).store.get(name);
      expect(record?.state).toBe('SUCCEEDED');
      const versions = Array.from({ length: record?.version ?? 0 }, (_, i) => i + 1);
      expect(after.filter((c) => c.name === name).map((c) => c.version)).toEqual(versions);
      // History was written with each change.
      expect((await (instances[1] as PostgresEngine).history.list(name)).map((e) => e.version)).toEqual(versions);
    }
  });

  it('one operation written from three instances at once, each with its own write hints: every lost race is reduced again against the winner (fast-check)', async () => {
    const schema = freshSchema();
    const instances = await Promise.all([open({ schema }), open({ schema }), open({ schema })]);
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.shuffledSubarray(
          Array.from({ length: 40 }, (_, i) => i),
          { minLength: 1 },
        ),
        async (order) => {
          const name = `interactions/hot-${++run}`;
          const events = order.map((i) => ({
            name,
            kind: 'interaction' as const,
            state: 'REQUIRES_ACTION' as const,
            providerState: 'requires_action',
            source: 'webhook' as const,
            eventId: `${name}-${i}`,
            updateTime: normalizeTime(`2026-12-06T00:00:${String(i).padStart(2, '0')}Z`),
          }));
          const hints = instances.map(() => new RecentRecords());
          let next = 0;
          const applied: number[] = [];
          await Promise.all(
            instances.flatMap((instance, k) =>
              Array.from({ length: 3 }, async () => {
                for (let event = events[next++]; event; event = events[next++]) {
                  const result = await ingest(event, { store: instance.store, hints: hints[k] });
                  if (result.outcome === 'applied') applied.push(result.record.version);
                }
              }),
            ),
          );
          const record = await (instances[0] as PostgresEngine).store.get(name);
          expect(record?.updateTime).toBe(normalizeTime(`2026-12-06T00:00:${String(Math.max(...order)).padStart(2, '0')}Z`));
          // Each applied event made exactly one version, 1..n with no gap or repeat, each logged once with its history.
          const versions = Array.from({ length: record?.version ?? 0 }, (_, i) => i + 1);
          expect(applied.sort((a, b) => a - b)).toEqual(versions);
          expect((await readAll(instances[1] as PostgresEngine)).filter((c) => c.name === name).map((c) => c.version)).toEqual(versions);
          expect((await (instances[2] as PostgresEngine).history.list(name)).map((e) => e.version)).toEqual(versions);
          // One decision per event, whichever instance took it.
          const decided = await (instances[0] as PostgresEngine).store.decisions(name);
          expect(decided.map((d) => d.eventId).sort()).toEqual(events.map((e) => e.eventId).sort());
        },
      ),
      { numRuns: 15 },
    );
  });

  // Skipped only off CI, where PgBouncer may not be installed (.ci/run installs it).
  it.skipIf(!PGBOUNCER && !process.env.CI)(
    'works through PgBouncer in transaction mode: two instances, a shuffled storm, claims and the change log',
    async () => {
      const bouncer = await startPgBouncer(url, 3);
      try {
        const schema = freshSchema();
        const instances = [
          await openPostgresEngine({ url: bouncer.url, schema, historyRetentionDays: 30, effects: true }),
          await openPostgresEngine({ url: bouncer.url, schema, historyRetentionDays: 30, effects: true }),
        ];
        opened.push(...instances);
        const names = Array.from({ length: 30 }, (_, i) => `batches/bouncer-${i}`);
        const events = storm(names, 5);
        let next = 0;
        await Promise.all(
          instances.flatMap((instance) =>
            Array.from({ length: 8 }, async () => {
              for (let event = events[next++]; event; event = events[next++]) await ingest(event, { store: instance.store });
            }),
          ),
        );
        const log = await readAll(instances[0] as PostgresEngine);
        for (const name of names) {
          const record = await instances[1]?.store.get(name);
          expect(record?.state).toBe('SUCCEEDED');
          expect(log.filter((c) => c.name === name).map((c) => c.version)).toEqual(
            Array.from({ length: record?.version ?? 0 }, (_, i) => i + 1),
          );
        }
        // Each state change queued its effect in the same transaction: as many effects as state changes in the log.
        const records = log.map((c) => JSON.parse(c.newRecord) as OperationRecord);
        const [effects] = await (instances[0] as PostgresEngine).db.rows<{ n: string }>('SELECT count(*) AS n FROM {s}.effects');
        expect(Number(effects?.n)).toBe(records.filter((r) => r.stateChanged).length);
        // Tracked jobs claimed by both at once: disjoint.
        for (let i = 0; i < 10; i++)
          await instances[0]?.store.write(
            {
              ...(await instances[0].store.get(names[0] as string)),
              name: `batches/claim-${i}`,
              state: null,
              version: 1,
            } as OperationRecord,
            undefined,
          );
        const claims = await Promise.all(instances.map((i) => i.store.claimDue('9999', 100, 60_000)));
        const handed = claims.flat().map((c) => c.record.name);
        expect(new Set(handed).size).toBe(handed.length);
        expect(handed.filter((n) => n.startsWith('batches/claim-')).sort()).toEqual(
          Array.from({ length: 10 }, (_, i) => `batches/claim-${i}`).sort(),
        );
      } finally {
        await bouncer.stop();
      }
    },
  );
});
