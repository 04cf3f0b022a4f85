/** `/healthz` on the embedded engine: can the file take a write of the size a delivery makes? */
import type { StoreHealth } from '../../app/ports.ts';
import type { Sqlite } from './sqlite.ts';

/**
 * A write that commits and leaves nothing behind (8 KiB of new rows, deleted
 * in the same transaction): a lock, a read-only file and a full disk all
 * refuse it, as they refuse a delivery. It commits because a rolled-back
 * transaction never reaches the file: its pages stay in SQLite's cache, so
 * on a full volume it succeeded while every delivery's commit failed
 * (ENOSPC on the WAL). At most once a second however often it is asked.
 */
export function writeProbe(db: Sqlite): () => Promise<StoreHealth> {
  let last: { at: number; answer: StoreHealth } | undefined;
  return async () => {
    if (!last || Date.now() - last.at > 1_000) {
      let answer: StoreHealth = 'ok';
      try {
        db.writeDerived(() => {
          db.run("INSERT INTO notes (key, value) VALUES ('health-probe', hex(zeroblob(4096)))");
          db.run("DELETE FROM notes WHERE key = 'health-probe'");
        });
      } catch (error) {
        answer = { unavailable: `the data file does not take a write (${String((error as Error)?.message ?? error).split('\n')[0]})` };
      }
      last = { at: Date.now(), answer };
    }
    return last.answer;
  };
}
