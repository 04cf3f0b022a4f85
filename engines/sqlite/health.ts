/** `/healthz` on the embedded engine: can the file take a write of the size a delivery makes? */
import type { StoreHealth } from '../../app/ports.ts';
import type { Sqlite } from './sqlite.ts';

class ProbeRollback extends Error {}

/**
 * A write that is rolled back: a lock, a read-only file and a full disk all
 * refuse it (8 KiB of new rows needs new pages, where an update in place
 * would fit in the pages a full file already has). At most once a second
 * however often it is asked; it leaves nothing behind.
 */
export function writeProbe(db: Sqlite): () => Promise<StoreHealth> {
  let last: { at: number; answer: StoreHealth } | undefined;
  return async () => {
    if (!last || Date.now() - last.at > 1_000) {
      let answer: StoreHealth = 'ok';
      try {
        db.writeDerived(() => {
          db.run("INSERT INTO notes (key, value) VALUES ('health-probe', hex(zeroblob(4096)))");
          throw new ProbeRollback();
        });
      } catch (error) {
        if (!(error instanceof ProbeRollback))
          answer = { unavailable: `the data file does not take a write (${String((error as Error)?.message ?? error).split('\n')[0]})` };
      }
      last = { at: Date.now(), answer };
    }
    return last.answer;
  };
}
