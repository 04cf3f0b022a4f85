/**
 * One clock for every instance on a schema: the database's. Instances on
 * several machines disagree about the time (a paused VM, a broken NTP); if
 * each judged leases by its own, one running ahead would see every claim of
 * the others as run out and take effects they are still delivering. So every
 * lease, claim and renewal is compared with the database's time inside its
 * statement (`DB_NOW_MS`), and the times the application itself writes (next
 * polls, `recordedAt`, overdue ages) come from `DatabaseClock`: the
 * database's time read by a round trip, carried forward by this process's
 * monotonic timer, read again every half minute.
 *
 * What an instance's own clock still decides is only how long its own timers
 * wait: when it stops a delivery whose lease it could not renew, it counts
 * from when it sent the claim, which is before the database stamped it, so it
 * stops early, never late.
 */
import type { Postgres } from './database.ts';

/** The database's time, epoch milliseconds, inside a statement. */
export const DB_NOW_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/** How often the offset is read again (a clock's drift in that time is far below a lease). */
const RESYNC_MS = 30_000;

export class DatabaseClock {
  /** The database's epoch ms at `syncedAt` (this process's monotonic ms); none before the first reading. */
  private base?: { dbMs: number; syncedAt: number };
  private timer?: NodeJS.Timeout;
  private syncing?: Promise<void>;

  constructor(private readonly db: Postgres) {}

  /**
   * Reads the database's time once: the midpoint of the round trip is taken as
   * the moment it was stamped (off by at most half a round trip). A failed
   * reading keeps the last one.
   */
  async sync(): Promise<void> {
    const sent = performance.now();
    const [row] = await this.db.rows<{ ms: string }>(`SELECT ${DB_NOW_MS} AS ms`);
    const received = performance.now();
    this.base = { dbMs: Number(row?.ms), syncedAt: (sent + received) / 2 };
  }

  /** Reads again every half minute until `stop`. */
  start(): void {
    this.timer ??= setInterval(() => void this.sync().catch(() => {}), RESYNC_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * The database's time now, as this process best knows it (its own clock
   * until the first reading). A reading older than the resync period is
   * renewed in the background: inside an app that only ticks (no `start`, no
   * timer) the clock is read again as it is used.
   */
  nowMs(): number {
    if (!this.base) return Date.now();
    const sinceMs = performance.now() - this.base.syncedAt;
    if (sinceMs > RESYNC_MS && !this.syncing)
      this.syncing = this.sync()
        .catch(() => {})
        .finally(() => {
          this.syncing = undefined;
        });
    return this.base.dbMs + sinceMs;
  }

  readonly now = (): Date => new Date(this.nowMs());
}
