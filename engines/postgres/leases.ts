/**
 * Timed chores shared by instances (discovery, the webhook health check,
 * pruning): each runs on the instance that holds its lease. A lease is a row
 * taken when it is free or has run out; an instance that stops holds it no
 * longer than the lease. Leases are stamped and read by the database's clock
 * (clock.ts), so an instance whose own clock is wrong takes none early.
 */
import { DB_NOW_MS } from './clock.ts';
import type { Postgres } from './database.ts';

/** True when `holder` now holds `job` for `forMs` (it was free, ran out, or was its own). */
export async function claimJob(db: Postgres, job: string, holder: string, forMs: number): Promise<boolean> {
  const rows = await db.rows(
    `INSERT INTO {s}.leases AS l (job, holder, until) VALUES ($1, $2, ${DB_NOW_MS} + $3::bigint)
     ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, until = excluded.until
     WHERE l.until <= ${DB_NOW_MS} OR l.holder = excluded.holder
     RETURNING holder`,
    [job, holder, forMs],
  );
  return rows.length > 0;
}
