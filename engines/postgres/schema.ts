/**
 * The PostgreSQL engine's schema, as code: each migration one step, all of a
 * start's steps in one transaction (PostgreSQL's DDL is transactional) under a
 * transaction-scoped advisory lock, so instances starting together migrate
 * once and the rest wait, then find it done. `ratchet migrate` runs the same
 * alone, for a role that may not change the schema at run time. A schema
 * migrated by a newer Ratchet is refused before anything is changed.
 *
 * Times the application compares (recordedAt, next polls) are the core's
 * normalised strings, compared as text as on SQLite; records are kept as the
 * JSON text the application wrote (exact, big numbers included).
 */
import { type Postgres, sqlStateOf } from './database.ts';

export const MIGRATIONS: readonly string[] = [
  // 1: the first schema.
  `CREATE TABLE {s}.operations (
     name text PRIMARY KEY,
     kind text NOT NULL,
     state text,
     version integer NOT NULL,
     recorded_at text NOT NULL,
     created_at text,
     record text NOT NULL,
     next_poll_at text,
     unchanged_polls integer NOT NULL DEFAULT 0,
     failed_polls integer NOT NULL DEFAULT 0,
     not_found_polls integer NOT NULL DEFAULT 0,
     poll_note text,
     -- The change log's order key of this operation's last change (see changes.tx).
     change_key xid8 NOT NULL
   );
   CREATE INDEX operations_recent ON {s}.operations (recorded_at DESC, name DESC);
   CREATE INDEX operations_recent_by_state ON {s}.operations (state, recorded_at DESC, name DESC);
   CREATE INDEX operations_recent_by_kind ON {s}.operations (kind, recorded_at DESC, name DESC);
   CREATE INDEX operations_due ON {s}.operations (next_poll_at) WHERE next_poll_at IS NOT NULL;
   -- The change log: one row per applied write, in the write's transaction. Read in (tx, seq) order, only
   -- below the oldest transaction still running (see change-log.ts): gap-free, the same from every instance.
   CREATE TABLE {s}.changes (
     seq bigserial PRIMARY KEY,
     tx xid8 NOT NULL,
     name text NOT NULL,
     version integer NOT NULL,
     write_kind text NOT NULL,
     new_record text NOT NULL,
     at timestamptz NOT NULL DEFAULT now()
   );
   CREATE INDEX changes_order ON {s}.changes (tx, seq);
   CREATE INDEX changes_at ON {s}.changes (at);
   CREATE TABLE {s}.history (
     name text NOT NULL,
     version integer NOT NULL,
     entry text NOT NULL,
     expires_at bigint NOT NULL,
     PRIMARY KEY (name, version)
   );
   CREATE INDEX history_expiry ON {s}.history (expires_at);
   CREATE TABLE {s}.decisions (
     id bigserial PRIMARY KEY,
     name text NOT NULL,
     decision text NOT NULL,
     at bigint NOT NULL
   );
   CREATE INDEX decisions_by_name ON {s}.decisions (name, id);
   CREATE INDEX decisions_at ON {s}.decisions (at);
   CREATE TABLE {s}.unprocessable (
     webhook_id text PRIMARY KEY,
     received_at text NOT NULL,
     entry text NOT NULL,
     at bigint NOT NULL
   );
   CREATE INDEX unprocessable_recent ON {s}.unprocessable (received_at DESC, webhook_id DESC);
   CREATE TABLE {s}.notes (key text PRIMARY KEY, value text NOT NULL);
   -- The effects queue: one row per state change, written with it; per operation, the lowest version first.
   CREATE TABLE {s}.effects (
     name text NOT NULL,
     version integer NOT NULL,
     transition text NOT NULL,
     attempts integer NOT NULL DEFAULT 0,
     first_attempt_at bigint,
     next_attempt_at bigint NOT NULL DEFAULT 0,
     claimed_until bigint NOT NULL DEFAULT 0,
     redriven boolean NOT NULL DEFAULT false,
     last_error text,
     PRIMARY KEY (name, version)
   );
   CREATE INDEX effects_due ON {s}.effects (next_attempt_at);
   CREATE INDEX effects_retrying ON {s}.effects (name) WHERE last_error IS NOT NULL;
   CREATE TABLE {s}.effect_ledger (
     key text PRIMARY KEY,
     delivered_at text NOT NULL,
     attempts integer,
     earlier_failure text,
     expires_at bigint NOT NULL
   );
   CREATE INDEX effect_ledger_expiry ON {s}.effect_ledger (expires_at);
   CREATE TABLE {s}.dead_letters (
     operation text NOT NULL,
     entry text NOT NULL,
     status text,
     letter text NOT NULL,
     expires_at bigint NOT NULL,
     PRIMARY KEY (operation, entry)
   );
   -- Timed work one instance at a time (discovery, webhook health, pruning): a lease per job.
   CREATE TABLE {s}.leases (job text PRIMARY KEY, holder text NOT NULL, until bigint NOT NULL);`,
  // 2: the console's sign-ins, shared by every instance (sign-ins.ts): keys are digests of the secrets.
  `CREATE TABLE {s}.sign_ins (key text PRIMARY KEY, value text NOT NULL, expires_at bigint NOT NULL);
   CREATE INDEX sign_ins_expiry ON {s}.sign_ins (expires_at);`,
  // 3: the W3C traceparent of the write that queued an effect (OpenTelemetry on), so its delivery joins that trace;
  // the operations counted by state and kind from an index alone (the console's counts, /metrics' gauges).
  `ALTER TABLE {s}.effects ADD COLUMN trace text;
   CREATE INDEX operations_by_state_kind ON {s}.operations (state, kind);`,
  // 4: overdue found by age from an index, whatever the poll schedule (`operations_open_by_age`: the open jobs not yet
  // marked, by kind and when they were tracked), and the marked open ones listed and counted without reading a record
  // (`operations_overdue`); the counts' oldest open job from (state, kind, created_at), which replaces (state, kind).
  // The mark's time is a column, back-filled from the records; the open states are written out, as the queries spell
  // them (a partial index is used only where the query's condition implies its own).
  `ALTER TABLE {s}.operations ADD COLUMN overdue_at text;
   UPDATE {s}.operations SET created_at = coalesce(created_at, record::jsonb ->> 'createdAt'), overdue_at = record::jsonb #>> '{overdue,at}'
     WHERE created_at IS NULL OR record::jsonb ? 'overdue';
   CREATE INDEX operations_open_by_age ON {s}.operations (kind, created_at)
     WHERE overdue_at IS NULL AND state IN ('PENDING', 'RUNNING', 'REQUIRES_ACTION');
   CREATE INDEX operations_overdue ON {s}.operations (state, kind, recorded_at, name)
     WHERE overdue_at IS NOT NULL AND state IN ('PENDING', 'RUNNING', 'REQUIRES_ACTION');
   CREATE INDEX operations_by_state_kind_age ON {s}.operations (state, kind, created_at);
   DROP INDEX {s}.operations_by_state_kind;`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

export class SchemaError extends Error {
  override name = 'SchemaError';
}

/** The schema version the database holds (0: none yet), read without changing anything. */
export async function schemaVersionOf(db: Postgres): Promise<number> {
  try {
    const [row] = await db.rows<{ value: string }>("SELECT value FROM {s}.meta WHERE key = 'schema_version'");
    return row ? Number(row.value) : 0;
  } catch (error) {
    // 42P01: no such table; 3F000: no such schema. Anything else (no connection, no permission) is the caller's to see.
    if (sqlStateOf(error) === '42P01' || sqlStateOf(error) === '3F000') return 0;
    throw error;
  }
}

function refuseNewer(db: Postgres, found: number, known: number): void {
  if (found > known)
    throw new SchemaError(
      `schema "${db.schema}" has version ${found}, migrated by a newer Ratchet (this one knows up to ${known}); run that version, or set DATABASE_SCHEMA to another schema`,
    );
}

/**
 * Brings the schema to SCHEMA_VERSION (nothing to do: no lock, no DDL);
 * returns the version it had (0: new). Two instances starting together: one
 * migrates, the other waits on the lock and finds it done.
 */
export async function migrate(db: Postgres, migrations: readonly string[] = MIGRATIONS): Promise<number> {
  const before = await schemaVersionOf(db);
  refuseNewer(db, before, migrations.length);
  if (before === migrations.length) return before;
  return db.transaction(async (tx) => {
    // Transaction-scoped: released at COMMIT, so it holds through a transaction pooler too.
    await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`ratchet:migrate:${db.schema}`]);
    await tx.query(db.sql('CREATE SCHEMA IF NOT EXISTS {s}'));
    await tx.query(db.sql('CREATE TABLE IF NOT EXISTS {s}.meta (key text PRIMARY KEY, value text NOT NULL)'));
    const [row] = (await tx.query<{ value: string }>(db.sql("SELECT value FROM {s}.meta WHERE key = 'schema_version'"))).rows;
    const found = row ? Number(row.value) : 0;
    refuseNewer(db, found, migrations.length);
    for (let version = found + 1; version <= migrations.length; version++) await tx.query(db.sql(migrations[version - 1] as string));
    await tx.query(
      db.sql("INSERT INTO {s}.meta (key, value) VALUES ('schema_version', $1) ON CONFLICT (key) DO UPDATE SET value = excluded.value"),
      [String(migrations.length)],
    );
    return found;
  });
}

/** For a start that may not migrate: the schema must already be at this version. */
export async function requireCurrent(db: Postgres): Promise<void> {
  const found = await schemaVersionOf(db);
  refuseNewer(db, found, SCHEMA_VERSION);
  if (found < SCHEMA_VERSION)
    throw new SchemaError(
      `schema "${db.schema}" is at version ${found}, this Ratchet needs ${SCHEMA_VERSION}: run ratchet migrate with a role that may change it`,
    );
}
