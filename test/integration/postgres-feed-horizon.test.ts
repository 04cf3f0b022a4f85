/**
 * The PostgreSQL change feed's horizon (engines/postgres/change-log.ts): it
 * waits for Ratchet's own writers only. Another session's write transaction
 * (the application's tables in another schema, left `idle in transaction`;
 * under another role too) holds nothing: a waiter wakes within a second of a
 * commit. A slow Ratchet writer still holds it: a later change is not handed
 * out before it, and it is not skipped when it commits late.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ingest } from '../../app/ingest.ts';
import { normalizeTime } from '../../core/time.ts';
import { PostgresChangeFeed } from '../../engines/postgres/change-feed.ts';
import { changesAfter, headCursor } from '../../engines/postgres/change-log.ts';
import { openPostgresEngine, type PostgresEngine } from '../../engines/postgres/index.ts';

const url = inject('postgresUrl');
const schema = `rt_horizon_${Date.now().toString(36)}`;
const admin = new pg.Pool({ connectionString: url, max: 2 });
let engine: PostgresEngine;

/** A URL of `url` for `role` (trust on loopback: no password). */
const asRole = (role: string) => {
  const copy = new URL(url);
  copy.username = role;
  return copy.href;
};

beforeAll(async () => {
  engine = await openPostgresEngine({ url, schema, historyRetentionDays: 30 });
  await admin.query(`CREATE SCHEMA IF NOT EXISTS app_${schema}`);
  await admin.query(`CREATE TABLE IF NOT EXISTS app_${schema}.imports (id serial PRIMARY KEY, body text)`);
  await admin.query(`DO $$ BEGIN CREATE ROLE importer LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`);
  await admin.query(`GRANT USAGE ON SCHEMA app_${schema} TO importer`);
  await admin.query(`GRANT ALL ON ALL TABLES IN SCHEMA app_${schema} TO importer`);
  await admin.query(`GRANT ALL ON ALL SEQUENCES IN SCHEMA app_${schema} TO importer`);
});
afterAll(async () => {
  await engine.close();
  await admin.end();
});

const event = (name: string, state: 'RUNNING' | 'SUCCEEDED', second: number) => ({
  name,
  kind: 'batch' as const,
  state,
  updateTime: normalizeTime(`2026-12-06T10:00:${String(second).padStart(2, '0')}Z`),
  providerState: `BATCH_STATE_${state}`,
  source: 'webhook' as const,
  eventId: `${name}-${second}`,
});

/** A session of the application's, holding a write transaction open in its own schema (as `role`, or the superuser). */
async function openImport(role?: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: role ? asRole(role) : url, application_name: 'nightly-import' });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`INSERT INTO app_${schema}.imports (body) VALUES ('row')`);
  return client; // idle in transaction, with a transaction id, until it is ended
}

describe('the change feed beside transactions that are not Ratchet’s', () => {
  for (const role of [undefined, 'importer'])
    it(`wakes a waiter within a second of a commit while another session${role ? ' of another role' : ''} holds a write transaction open`, async () => {
      const feed = new PostgresChangeFeed(engine.db);
      const imports = [await openImport(role)];
      try {
        const after = await feed.headCursor();
        const name = `batches/horizon-${role ?? 'same'}`;
        const waiting = feed.next(after, {}, 10, 8_000);
        await new Promise((resolve) => setTimeout(resolve, 150));
        // A second import starts after the first: both older and younger than Ratchet's write, neither holds it.
        imports.push(await openImport(role));
        const committed = Date.now();
        await ingest(event(name, 'RUNNING', 1), { store: engine.store });
        const page = await waiting;
        expect(page.changes.map((c) => `${c.name}#${c.version}`)).toEqual([`${name}#1`]);
        expect(Date.now() - committed).toBeLessThan(1_000);
        // The transactions still run: the import was not waited for, it is still open.
        const [open] = (
          await admin.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'nightly-import' AND state = 'idle in transaction'",
          )
        ).rows;
        expect(open.n).toBeGreaterThanOrEqual(2);
      } finally {
        for (const client of imports) await client.end();
        feed.close();
      }
    });

  it('holds a later change behind a slow Ratchet writer, and hands the slow one out when it commits (none skipped)', async () => {
    const start = await headCursor(engine.db);
    const slow = 'batches/horizon-slow';
    const fast = 'batches/horizon-fast';
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let began!: () => void;
    const begun = new Promise<void>((resolve) => {
      began = resolve;
    });
    // A Ratchet write that takes its time between its change row and its commit (a write over a slow network).
    const slowWrite = engine.db.transaction(async (tx) => {
      await engine.db.run(
        `INSERT INTO {s}.changes (tx, name, version, write_kind, new_record) VALUES (pg_current_xact_id(), $1, 1, 'state', $2)`,
        [slow, JSON.stringify({ name: slow, version: 1 })],
        tx,
      );
      began();
      await gate;
    });
    await begun;
    const imports = await openImport('importer');
    try {
      await ingest(event(fast, 'RUNNING', 2), { store: engine.store });
      // Committed, but behind the slow writer's transaction: not handed out yet (it would come before it).
      expect((await changesAfter(engine.db, start, 10)).changes).toEqual([]);
      release();
      await slowWrite;
      const page = await changesAfter(engine.db, start, 10);
      expect(page.changes.map((c) => c.name)).toEqual([slow, fast]);
    } finally {
      release();
      await imports.end();
    }
  });
});
