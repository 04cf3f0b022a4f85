/**
 * Timed chores shared by instances (discovery, the webhook health check,
 * pruning): each runs on the instance that holds its lease. A lease is a row
 * taken when it is free or has run out; an instance that stops holds it no
 * longer than the lease.
 */
import type { Postgres } from './database.ts';

/** True when `holder` now holds `job` for `forMs` (it was free, ran out, or was its own). */
export async function claimJob(db: Postgres, job: string, holder: string, forMs: number, now = Date.now()): Promise<boolean> {
  const rows = await db.rows(
    `INSERT INTO {s}.leases AS l (job, holder, until) VALUES ($1, $2, $3)
     ON CONFLICT (job) DO UPDATE SET holder = excluded.holder, until = excluded.until
     WHERE l.until <= $4 OR l.holder = excluded.holder
     RETURNING holder`,
    [job, holder, now + forMs, now],
  );
  return rows.length > 0;
}
