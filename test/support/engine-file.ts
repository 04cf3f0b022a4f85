/**
 * Reads a running runtime's SQLite file from the test process, as an operator
 * with `sqlite3` would (WAL lets a reader in beside the writer).
 */
import type { OperationRecord } from '../../core/reducer.ts';
import { Sqlite } from '../../engines/sqlite/sqlite.ts';

export type OutboxChange = OperationRecord & { writeKind: string; seq: number };

/** Every change in the outbox, in order. */
export function outboxChanges(dataFile: string): OutboxChange[] {
  const db = Sqlite.open(dataFile, { readonly: true });
  try {
    return db
      .all<{ seq: number; write_kind: string; new_record: string }>('SELECT seq, write_kind, new_record FROM changes ORDER BY seq')
      .map((row) => ({ ...(JSON.parse(row.new_record) as OperationRecord), writeKind: row.write_kind, seq: row.seq }));
  } finally {
    db.close();
  }
}

/** Runs `work` on a writable connection of its own (to plant a poisoned change, or to hold the write lock), closed once `work` is done. */
export function withConnection<T>(dataFile: string, work: (db: Sqlite) => T): T {
  const db = Sqlite.open(dataFile, { plain: true });
  let result: T;
  try {
    result = work(db);
  } catch (error) {
    db.close();
    throw error;
  }
  if (result instanceof Promise) return result.finally(() => db.close()) as T;
  db.close();
  return result;
}
