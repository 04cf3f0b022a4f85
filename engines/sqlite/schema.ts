/**
 * The embedded engine's schema, versioned in the file (`PRAGMA user_version`)
 * and migrated forward on start, each step in its own transaction. A file
 * written by a newer Ratchet is refused, never downgraded.
 *
 * Tables:
 * - `operations`: one row per operation, the record as JSON beside the columns
 *   the queries use; `next_poll_at` is set only while the operation is open and
 *   pollable, so the due index holds open operations only.
 * - `changes`: the outbox, this engine's table stream: one row per applied
 *   write, appended in the write's own transaction.
 * - `checkpoints`: how far each outbox consumer (history, effects) has read.
 * - `history`, `effect_messages` (the per-operation effects queue),
 *   `effect_ledger`, `dead_letters`: what the consumers keep.
 * - `notes`: small named values (the last unmapped delivery, the health probe).
 * - `decisions` (2): each event's fate per operation, applied or discarded.
 * - `unprocessable` (3): authentic deliveries that can never be used, one per webhook-id.
 * - `effect_messages.name`, `.last_error` (4): whose effect waits, and what its last attempt came to.
 * - `changes.trace`, `effect_messages.trace` (5): the traceparent of the write's span, for its effect's spans;
 *   `operations_by_state_kind`, the counts per state and kind read from an index.
 * - `operations.created_at`, `.overdue_at` (6): when the job was tracked and when it was marked overdue, as
 *   columns: `operations_open_by_age` finds the open jobs not yet marked by kind and age (reconcile's overdue
 *   sweep, whatever their poll schedule), `operations_overdue` the marked open ones (`?overdue=true`, the counts);
 *   the counts' oldest open job from `operations_by_state_kind_age`, which replaces `operations_by_state_kind`.
 */
import type { Sqlite } from './sqlite.ts';

export const MIGRATIONS: readonly string[] = [
  // 1: the first embedded schema.
  `CREATE TABLE operations (
     name TEXT PRIMARY KEY,
     kind TEXT NOT NULL,
     state TEXT,
     version INTEGER NOT NULL,
     recorded_at TEXT NOT NULL,
     record TEXT NOT NULL,
     poll_bucket TEXT NOT NULL,
     next_poll_at TEXT,
     unchanged_polls INTEGER NOT NULL DEFAULT 0,
     failed_polls INTEGER NOT NULL DEFAULT 0,
     not_found_polls INTEGER NOT NULL DEFAULT 0,
     poll_note TEXT
   ) STRICT;
   CREATE INDEX operations_recent ON operations (recorded_at, name);
   CREATE INDEX operations_recent_by_state ON operations (state, recorded_at, name);
   CREATE INDEX operations_recent_by_kind ON operations (kind, recorded_at, name);
   CREATE INDEX operations_due ON operations (poll_bucket, next_poll_at) WHERE next_poll_at IS NOT NULL;
   CREATE TABLE changes (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     name TEXT NOT NULL,
     version INTEGER NOT NULL,
     write_kind TEXT NOT NULL,
     old_record TEXT,
     new_record TEXT NOT NULL,
     at INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX changes_at ON changes (at);
   CREATE TABLE checkpoints (consumer TEXT PRIMARY KEY, seq INTEGER NOT NULL) STRICT;
   CREATE TABLE history (
     name TEXT NOT NULL,
     version INTEGER NOT NULL,
     entry TEXT NOT NULL,
     expires_at INTEGER NOT NULL,
     PRIMARY KEY (name, version)
   ) STRICT, WITHOUT ROWID;
   CREATE INDEX history_expiry ON history (expires_at);
   CREATE TABLE effect_messages (
     seq INTEGER PRIMARY KEY AUTOINCREMENT,
     grp TEXT NOT NULL,
     body TEXT NOT NULL,
     receive_count INTEGER NOT NULL DEFAULT 0,
     first_receive_at INTEGER NOT NULL DEFAULT 0,
     retry_at INTEGER NOT NULL DEFAULT 0,
     redriven INTEGER NOT NULL DEFAULT 0
   ) STRICT;
   CREATE TABLE effect_ledger (key TEXT PRIMARY KEY, delivered_at TEXT NOT NULL, expires_at INTEGER NOT NULL) STRICT;
   CREATE INDEX effect_ledger_expiry ON effect_ledger (expires_at);
   CREATE TABLE dead_letters (
     operation TEXT NOT NULL,
     entry TEXT NOT NULL,
     status TEXT,
     letter TEXT NOT NULL,
     expires_at INTEGER NOT NULL,
     PRIMARY KEY (operation, entry)
   ) STRICT;
   CREATE TABLE notes (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;`,
  // 2: the decisions log, every event's fate per operation (the last 200, 30 days).
  `CREATE TABLE decisions (
     id INTEGER PRIMARY KEY AUTOINCREMENT,
     name TEXT NOT NULL,
     decision TEXT NOT NULL,
     at INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX decisions_by_name ON decisions (name, id);
   CREATE INDEX decisions_at ON decisions (at);`,
  // 3: authentic deliveries no retry can make usable (answered 200), one per webhook-id, 30 days.
  `CREATE TABLE unprocessable (
     webhook_id TEXT PRIMARY KEY,
     received_at TEXT NOT NULL,
     entry TEXT NOT NULL,
     at INTEGER NOT NULL
   ) STRICT;
   CREATE INDEX unprocessable_recent ON unprocessable (received_at, webhook_id);`,
  // 4: each effect message's operation and its last failed attempt in words: a failing receiver shows at once;
  // the ledger keeps on which attempt a delivery succeeded and what failed before it.
  `ALTER TABLE effect_messages ADD COLUMN name TEXT;
   ALTER TABLE effect_messages ADD COLUMN last_error TEXT;
   ALTER TABLE effect_ledger ADD COLUMN attempts INTEGER;
   ALTER TABLE effect_ledger ADD COLUMN earlier_failure TEXT;
   UPDATE effect_messages SET name = json_extract(body, '$.dynamodb.Keys.name.S');
   CREATE INDEX effect_messages_retrying ON effect_messages (name) WHERE receive_count > 0;
   CREATE INDEX operations_due_at ON operations (next_poll_at) WHERE next_poll_at IS NOT NULL;`,
  // 5: the W3C traceparent of the write that made a change (OpenTelemetry on), carried to its effect so the delivery joins that trace.
  // The operations counted by state and kind from an index alone (the console's counts, /metrics' gauges).
  `ALTER TABLE changes ADD COLUMN trace TEXT;
   ALTER TABLE effect_messages ADD COLUMN trace TEXT;
   CREATE INDEX operations_by_state_kind ON operations (state, kind);`,
  // 6: overdue found by age from an index, whatever the poll schedule, and the marked jobs listed and counted without
  // reading the records: both times as columns, back-filled from the records. (The open states are written out: the
  // queries repeat this list, as a partial index needs.)
  `ALTER TABLE operations ADD COLUMN created_at TEXT;
   ALTER TABLE operations ADD COLUMN overdue_at TEXT;
   UPDATE operations SET created_at = json_extract(record, '$.createdAt'), overdue_at = json_extract(record, '$.overdue.at');
   CREATE INDEX operations_open_by_age ON operations (kind, created_at)
     WHERE overdue_at IS NULL AND state IN ('PENDING', 'RUNNING', 'REQUIRES_ACTION');
   CREATE INDEX operations_overdue ON operations (state, kind, recorded_at, name)
     WHERE overdue_at IS NOT NULL AND state IN ('PENDING', 'RUNNING', 'REQUIRES_ACTION');
   CREATE INDEX operations_by_state_kind_age ON operations (state, kind, created_at);
   DROP INDEX operations_by_state_kind;`,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

export class SchemaError extends Error {
  override name = 'SchemaError';
}

/** The schema version a file carries (0: new), read without changing anything. */
export function schemaVersionOf(db: Sqlite): number {
  return db.get<{ user_version: number }>('PRAGMA user_version')?.user_version ?? 0;
}

/** Refuses a file written by a newer Ratchet, before anything (even the journal mode) is changed in it. */
export function checkNotNewer(db: Sqlite, known = MIGRATIONS.length): void {
  const found = schemaVersionOf(db);
  if (found > known) {
    throw new SchemaError(
      `${db.path} has schema version ${found}, written by a newer Ratchet (this one knows up to ${known}); run that version, or set DATA_DIR to another folder`,
    );
  }
}

/** Brings the file to SCHEMA_VERSION, each step in its own transaction; returns the version it had (0: new). */
export function migrate(db: Sqlite, migrations: readonly string[] = MIGRATIONS): number {
  checkNotNewer(db, migrations.length);
  const found = schemaVersionOf(db);
  for (let version = found + 1; version <= migrations.length; version++) {
    db.write(() => {
      db.connection.exec(migrations[version - 1] as string);
      db.connection.exec(`PRAGMA user_version = ${version}`);
    });
  }
  return found;
}
