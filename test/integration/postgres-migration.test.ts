/**
 * PostgreSQL's schema 4 on a database that schema 3 filled: the overdue mark
 * and the time a job was tracked move from the records into the columns the
 * indexes read (a job marked overdue before the upgrade is still listed as
 * overdue, and one not yet marked is found by age), and the partial indexes'
 * open states are the lifecycle's own.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { isTerminal, OPERATION_KINDS, OPERATION_STATES } from '../../core/lifecycle.ts';
import type { OverdueLimits } from '../../core/overdue.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { connect } from '../../engines/postgres/database.ts';
import { openPostgresEngine } from '../../engines/postgres/index.ts';
import { MIGRATIONS, migrate, SCHEMA_VERSION } from '../../engines/postgres/schema.ts';
import { sqlList } from '../../engines/sql/rows.ts';

const url = inject('postgresUrl');
const schema = `rt_migrate4_${Date.now().toString(36)}`;
const db = connect({ url, schema });
afterAll(async () => {
  await db.run(`DROP SCHEMA IF EXISTS {s} CASCADE`);
  await db.close();
});

describe('schema 4 over a schema 3 database', () => {
  it('back-fills overdue_at and created_at from the records, so marked jobs stay listed and the rest are found by age', async () => {
    await migrate(db, MIGRATIONS.slice(0, 3));
    const old = '2026-01-01T00:00:00.000000000Z';
    const marked = {
      ...trackedRecord('interactions/marked-before', 'interaction', old),
      state: 'RUNNING' as const,
      overdue: { at: old, afterSeconds: 60 },
    };
    const unmarked = { ...trackedRecord('interactions/never-marked', 'interaction', old), state: 'RUNNING' as const };
    for (const [record, createdAt] of [
      [marked, old],
      [unmarked, null],
    ] as const)
      await db.run(
        `INSERT INTO {s}.operations (name, kind, state, version, recorded_at, created_at, record, change_key)
         VALUES ($1, $2, $3, 1, $4, $5, $6, pg_current_xact_id())`,
        [record.name, record.kind, record.state, old, createdAt, JSON.stringify(record)],
      );
    expect(await migrate(db)).toBe(3);
    const rows = await db.rows<{ name: string; created_at: string; overdue_at: string | null }>(
      'SELECT name, created_at, overdue_at FROM {s}.operations ORDER BY name',
    );
    expect(rows).toEqual([
      { name: 'interactions/marked-before', created_at: old, overdue_at: old },
      { name: 'interactions/never-marked', created_at: old, overdue_at: null },
    ]);
    const engine = await openPostgresEngine({ url, schema, historyRetentionDays: 30 });
    try {
      expect((await engine.store.list({ overdue: true, limit: 10 })).operations.map((o) => o.name)).toEqual(['interactions/marked-before']);
      // Every kind off but interactions, whose limit (a minute) the job passed long ago.
      const limits = { ...Object.fromEntries(OPERATION_KINDS.map((kind) => [kind, null])), interaction: 60 } as OverdueLimits;
      const found = await engine.store.findOverdue(limits, old, 10);
      expect(found.records.map((record) => record.name)).toEqual(['interactions/never-marked']);
    } finally {
      await engine.close();
    }
  });

  it('writes the open states into its partial indexes exactly as the lifecycle has them (the queries repeat them)', () => {
    const open = sqlList(OPERATION_STATES.filter((state) => !isTerminal(state)));
    expect(SCHEMA_VERSION).toBe(4);
    expect((MIGRATIONS[3]?.match(/state IN \(([^)]*)\)/g) ?? []).map((match) => match.slice('state IN ('.length, -1))).toEqual([
      open,
      open,
    ]);
  });
});
