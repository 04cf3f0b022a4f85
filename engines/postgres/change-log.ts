/**
 * The change log on PostgreSQL, read by cursor: one feed for every instance.
 *
 * Rows are written in the write's own statement (one-write.ts) with an
 * order key `tx`: that transaction's id, raised to the operation's previous
 * change's key where that is higher. A reader takes only rows whose key is
 * below the horizon (HORIZON): the oldest of Ratchet's transactions that its
 * snapshot still sees running, else the snapshot's end. A row so taken
 * belongs to a finished transaction (its own id is at most its key), and any
 * row committed later has a key at or above that horizon: nothing ever
 * appears before a cursor already handed out (gap-free), each operation's
 * changes come in version order, and every instance reads the same order.
 *
 * Transactions that may not write here (the application's own, a long import,
 * a session left `idle in transaction`, an `onChange` handler's) do not hold
 * the horizon: a running transaction is passed over when `pg_stat_activity`,
 * read after the snapshot, shows it under another name than FEED_WRITER
 * (every transaction of Ratchet's names itself: database.ts). Every doubt
 * holds the horizon instead: a transaction that ended between the snapshot
 * and that read counts as a writer until the next read. Every write to this
 * log must be named before it takes a transaction id: in `Postgres.transaction`,
 * or, in one statement, as one-write.ts does.
 */
import { FEED_WRITER, type Postgres } from './database.ts';

/**
 * The feed's horizon, in SQL: no Ratchet transaction the statement's snapshot
 * sees running has an id below it. `pg_snapshot_xip` lists the transactions
 * running when the snapshot was taken; one still running under another name
 * (read now, after the snapshot) is passed over.
 */
const HORIZON = `(SELECT coalesce(min(x), pg_snapshot_xmax(pg_current_snapshot()))
   FROM pg_snapshot_xip(pg_current_snapshot()) AS x
   WHERE NOT EXISTS (SELECT 1 FROM pg_stat_get_activity(NULL) AS a WHERE a.backend_xid = xid(x)
     AND a.application_name IS DISTINCT FROM '${FEED_WRITER}'))`;

export interface LoggedChange {
  /** Opaque: pass it back to read on after this change, from any instance. */
  cursor: string;
  name: string;
  version: number;
  writeKind: string;
  newRecord: string;
  at: Date;
}

export class InvalidChangeCursorError extends Error {
  override name = 'InvalidChangeCursorError';
}

/** A cursor's form: `<order key>.<seq>`. */
export const CHANGE_CURSOR = /^(\d{1,20})\.(\d{1,20})$/;
/** The note holding the cursor of the last change pruned: a cursor before it is expired. */
export const PRUNED_NOTE = 'changes-pruned-through';

function cursorOf(tx: string, seq: string): string {
  return `${tx}.${seq}`;
}

/** Up to `limit` changes after `cursor` (from the start without one), only `name`'s when given, and the cursor to read on from. */
export async function changesAfter(
  db: Postgres,
  cursor: string | undefined,
  limit: number,
  name?: string,
): Promise<{ changes: LoggedChange[]; cursor: string | undefined }> {
  let after: [string, string] = ['0', '0'];
  if (cursor !== undefined) {
    const match = CHANGE_CURSOR.exec(cursor);
    if (!match) throw new InvalidChangeCursorError('cursor is not one this feed handed out');
    after = [match[1] as string, match[2] as string];
  }
  const rows = await db.rows<{ tx: string; seq: string; name: string; version: number; write_kind: string; new_record: string; at: Date }>(
    `SELECT tx, seq, name, version, write_kind, new_record, at FROM {s}.changes
     WHERE (tx, seq) > ($1::xid8, $2::bigint) AND tx < ${HORIZON}${name === undefined ? '' : ' AND name = $4'}
     ORDER BY tx, seq LIMIT $3`,
    [after[0], after[1], limit, ...(name === undefined ? [] : [name])],
  );
  const changes = rows.map((row) => ({
    cursor: cursorOf(row.tx, row.seq),
    name: row.name,
    version: row.version,
    writeKind: row.write_kind,
    newRecord: row.new_record,
    at: row.at,
  }));
  return { changes, cursor: changes.at(-1)?.cursor ?? cursor };
}

/** The cursor of the last settled change (`0.0` before any): reading after it returns what changes from now on. */
export async function headCursor(db: Postgres): Promise<string> {
  const [row] = await db.rows<{ tx: string; seq: string }>(
    `SELECT tx, seq FROM {s}.changes WHERE tx < ${HORIZON} ORDER BY tx DESC, seq DESC LIMIT 1`,
  );
  return row ? cursorOf(row.tx, row.seq) : '0.0';
}

/**
 * Removes settled changes older than `retentionMs` (the feed keeps a day by
 * default, as SQLite's outbox and DynamoDB's stream), and notes the last one
 * removed: a cursor before it is answered as expired, never read past.
 */
export async function pruneChanges(db: Postgres, retentionMs: number): Promise<void> {
  await db.transaction(async (tx) => {
    const [last] = await db.rows<{ tx: string; seq: string }>(
      `WITH gone AS (
         DELETE FROM {s}.changes WHERE at < now() - ($1::bigint * interval '1 millisecond')
           AND tx < ${HORIZON} RETURNING tx, seq)
       SELECT tx, seq FROM gone ORDER BY tx DESC, seq DESC LIMIT 1`,
      [retentionMs],
      tx,
    );
    if (last)
      await db.run(
        'INSERT INTO {s}.notes (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        [PRUNED_NOTE, cursorOf(last.tx, last.seq)],
        tx,
      );
  });
}
