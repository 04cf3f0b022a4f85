/**
 * The change log on PostgreSQL, read by cursor: one feed for every instance.
 *
 * Rows are written in the write's own transaction (operation-store.ts) with an
 * order key `tx`: that transaction's id, raised to the operation's previous
 * change's key where that is higher. A reader takes only rows whose key is
 * below the oldest transaction still running (`pg_snapshot_xmin`), in
 * (tx, seq) order. A row so taken belongs to a finished transaction (its own id
 * is at most its key), and any row committed later has a key at or above that
 * horizon: nothing ever appears before a cursor already handed out (gap-free),
 * each operation's changes come in version order, and every instance reads
 * the same order. The price: a transaction left open anywhere on the server
 * holds the horizon, and the feed waits for it (docs/operations.md).
 */
import type { Postgres } from './database.ts';

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

const CURSOR = /^(\d{1,20})\.(\d{1,20})$/;

function cursorOf(tx: string, seq: string): string {
  return `${tx}.${seq}`;
}

/** Up to `limit` changes after `cursor` (from the start without one), and the cursor to read on from. */
export async function changesAfter(
  db: Postgres,
  cursor: string | undefined,
  limit: number,
): Promise<{ changes: LoggedChange[]; cursor: string | undefined }> {
  let after: [string, string] = ['0', '0'];
  if (cursor !== undefined) {
    const match = CURSOR.exec(cursor);
    if (!match) throw new InvalidChangeCursorError('cursor is not one this feed handed out');
    after = [match[1] as string, match[2] as string];
  }
  const rows = await db.rows<{ tx: string; seq: string; name: string; version: number; write_kind: string; new_record: string; at: Date }>(
    `SELECT tx, seq, name, version, write_kind, new_record, at FROM {s}.changes
     WHERE (tx, seq) > ($1::xid8, $2::bigint) AND tx < pg_snapshot_xmin(pg_current_snapshot())
     ORDER BY tx, seq LIMIT $3`,
    [after[0], after[1], limit],
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

/** Removes changes older than `retentionMs` (the feed keeps a day by default, as SQLite's outbox and DynamoDB's stream). */
export async function pruneChanges(db: Postgres, retentionMs: number): Promise<void> {
  await db.run("DELETE FROM {s}.changes WHERE at < now() - ($1::bigint * interval '1 millisecond')", [retentionMs]);
}
