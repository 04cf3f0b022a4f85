/**
 * The effects queue on PostgreSQL, shared by every instance. Each state
 * change's effect is a row written in the change's own transaction
 * (operation-store.ts). Per operation only the lowest version is ever offered
 * (first in, first out), and only when it is neither waiting out a backoff nor
 * claimed; a claim is a short lease (`claimed_until`, EFFECTS_LEASE_SECONDS),
 * renewed while its delivery runs, so an instance killed in the middle of a
 * delivery, or cut off from the database, leaves nothing stuck for long: after
 * the lease another instance offers it again, with the same id (the ledger
 * skips a sink that recorded it). A delivery whose lease could not be renewed
 * is stopped before the lease ends (its sinks are signalled), so two
 * instances never deliver one effect at once (as far as their clocks agree).
 * Claims take rows with `FOR UPDATE SKIP LOCKED`: two instances are never
 * handed the same effect.
 *
 * Each claimed effect goes to the application's delivery (app/effects/deliver.ts);
 * done, its row is deleted (the next version of its operation comes up);
 * retry, it waits out the backoff with its outcome in words kept for the console.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { EffectOutcome, PendingEffect } from '../../app/effects/deliver.ts';
import type { Transition } from '../../app/effects/transition.ts';
import type { Postgres } from './database.ts';

export type Deliver = (effect: PendingEffect) => Promise<EffectOutcome>;

export interface PostgresEffectsQueueOptions {
  logger: Pick<Logger, 'error' | 'warn'>;
  /** Effects delivered at once by this instance (each of another operation; default 8). */
  concurrency?: number;
  /** How long a claim holds unless renewed (default 5 s; renewed while its delivery runs). */
  leaseMs?: number;
  /** How often an idle instance looks for effects other instances' writes queued (default 250 ms; a local write wakes it at once). */
  pollMs?: number;
}

interface EffectRow {
  name: string;
  version: number;
  transition: string;
  attempts: number;
  first_attempt_at: string;
  redriven: boolean;
  last_error: string | null;
  /** The lease this claim holds until (epoch ms): it names the claim, so only its holder settles or releases it. */
  claimed_until: string;
}

/** How often a settle the database did not take is tried again while the claim's lease runs. */
const SETTLE_RETRY_MS = 500;

export class PostgresEffectsQueue {
  private deliver?: Deliver;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private running?: Promise<void>;
  private again = false;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly pollMs: number;

  constructor(
    private readonly db: Postgres,
    private readonly options: PostgresEffectsQueueOptions,
  ) {
    this.concurrency = options.concurrency ?? 8;
    this.leaseMs = options.leaseMs ?? 5_000;
    this.pollMs = options.pollMs ?? 250;
  }

  start(deliver: Deliver): void {
    this.deliver = deliver;
    this.wake();
  }

  /** A state change was committed (here, or announced by another instance): look now. */
  wake(): void {
    if (this.stopped || !this.deliver) return;
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = this.round()
      .catch((error) => this.options.logger.error('effects queue: a round failed; trying again', { error }))
      .finally(() => {
        this.running = undefined;
        if (this.stopped) return;
        if (this.again) {
          this.again = false;
          this.wake();
        } else this.timer = setTimeout(() => this.wake(), this.pollMs);
      });
  }

  /** Claims and delivers until nothing is ready. */
  private async round(): Promise<void> {
    await this.drain(this.deliver as Deliver, Number.POSITIVE_INFINITY);
  }

  /**
   * Claims and delivers until nothing is ready or `deadlineMs` (epoch ms)
   * has passed, with no timer of its own (a cron's tick): how many deliveries
   * were settled. Beside a running queue, or another instance's, each effect
   * still goes to one of them only (its claim).
   */
  async drain(deliver: Deliver, deadlineMs: number): Promise<number> {
    let settled = 0;
    while (Date.now() < deadlineMs && !this.stopped) {
      const claimed = await this.claim(this.concurrency);
      if (claimed.length === 0) break;
      await Promise.all(claimed.map((row) => this.offer(row, deliver)));
      settled += claimed.length;
    }
    return settled;
  }

  /** Up to `limit` effects, each its operation's lowest version, ready and unclaimed, claimed for the lease. */
  async claim(limit: number, nowMs = Date.now()): Promise<EffectRow[]> {
    return this.db.rows<EffectRow>(
      `WITH heads AS (
         SELECT DISTINCT ON (name) name, version FROM {s}.effects ORDER BY name, version
       ), ready AS (
         SELECT e.name, e.version FROM {s}.effects e JOIN heads h ON e.name = h.name AND e.version = h.version
         WHERE e.next_attempt_at <= $1 AND e.claimed_until <= $1
         ORDER BY e.next_attempt_at, e.name LIMIT $2
         FOR UPDATE OF e SKIP LOCKED
       )
       UPDATE {s}.effects e SET claimed_until = $1 + $3::bigint, attempts = e.attempts + 1,
         first_attempt_at = coalesce(e.first_attempt_at, $1)
       FROM ready WHERE e.name = ready.name AND e.version = ready.version
       RETURNING e.name, e.version, e.transition, e.attempts, e.first_attempt_at, e.redriven, e.last_error, e.claimed_until`,
      [nowMs, limit, this.leaseMs],
    );
  }

  private async offer(row: EffectRow, deliver: Deliver): Promise<void> {
    const claim = this.keep(row);
    let outcome: EffectOutcome;
    try {
      outcome = await deliver({
        transition: JSON.parse(row.transition) as Transition,
        attempt: row.attempts,
        firstAttemptAtMs: Number(row.first_attempt_at),
        ...(row.last_error && { earlierFailure: row.last_error }),
        redriven: row.redriven,
        signal: claim.signal,
      });
    } catch (error) {
      // The delivery's own records could not be written (the database away, restarting): the claim is released as
      // soon as the database answers again, so the effect comes up again then, not at the end of its lease.
      this.options.logger.warn('effects queue: a delivery could not be settled; its claim is released once the database answers', {
        error,
      });
      const token = await claim.end();
      await this.settle(token, () =>
        this.db.run('UPDATE {s}.effects SET claimed_until = 0 WHERE name = $1 AND version = $2 AND claimed_until = $3', [
          row.name,
          row.version,
          token,
        ]),
      );
      return;
    }
    const token = await claim.end();
    await this.settle(token, () =>
      outcome.kind === 'done'
        ? this.db.run('DELETE FROM {s}.effects WHERE name = $1 AND version = $2 AND claimed_until = $3', [row.name, row.version, token])
        : this.db.run(
            'UPDATE {s}.effects SET next_attempt_at = $3, claimed_until = 0, last_error = $4 WHERE name = $1 AND version = $2 AND claimed_until = $5',
            [row.name, row.version, Date.now() + outcome.inMs, outcome.lastError, token],
          ),
    );
  }

  /**
   * Keeps `row`'s claim while its delivery runs: a fifth of the lease apart it
   * looks, renews the lease once less than three fifths of it is left, and
   * aborts the delivery's signal when the claim was taken over, or when the
   * lease is about to end unrenewed (the database away). `end` stops it and
   * gives the claim's latest `claimed_until`, which names it for the settle.
   */
  private keep(row: EffectRow): { signal: AbortSignal; end(): Promise<string> } {
    const controller = new AbortController();
    let token = row.claimed_until;
    let renewing: Promise<void> | undefined;
    const tickMs = Math.max(50, Math.floor(this.leaseMs / 5));
    const renew = async () => {
      const until = Date.now() + this.leaseMs;
      try {
        const renewed = await this.db.run(
          'UPDATE {s}.effects SET claimed_until = $4 WHERE name = $1 AND version = $2 AND claimed_until = $3',
          [row.name, row.version, token, until],
        );
        if (renewed === 1) token = String(until);
        else controller.abort(new Error('its claim was taken over (its lease ran out)'));
      } catch {
        // The database away: the next tick tries again, and stops the delivery if the lease is about to end.
      }
    };
    const timer = setInterval(() => {
      const left = Number(token) - Date.now();
      if (left <= tickMs) controller.abort(new Error('its claim could not be renewed before its lease ended (the database away)'));
      else if (!renewing && left <= (this.leaseMs * 3) / 5)
        renewing = renew().finally(() => {
          renewing = undefined;
        });
    }, tickMs);
    timer.unref();
    return {
      signal: controller.signal,
      end: async () => {
        clearInterval(timer);
        // A renewal in flight is waited for a tick at most (a database that hangs does not hold the settle): if it
        // lands later, the settle's token is stale, matches nothing, and the lease frees the effect (the ledger keeps
        // a delivered sink from a second delivery).
        await Promise.race([renewing, new Promise((resolve) => setTimeout(resolve, tickMs).unref())]);
        return token;
      },
    };
  }

  /**
   * `write` (this claim's settle or release), tried again every half second while
   * the database does not take it, until the claim's lease ends (then the lease
   * frees the effect anyway) or the queue stops. Only the claim's own holder
   * matches `claimed_until`: a lease that ran out and was claimed again is left alone.
   */
  private async settle(claimedUntil: string, write: () => Promise<number>): Promise<void> {
    for (;;) {
      try {
        await write();
        return;
      } catch (error) {
        if (this.stopped || Date.now() + SETTLE_RETRY_MS >= Number(claimedUntil)) {
          this.options.logger.warn('effects queue: a claim could not be settled; its lease frees it', { error });
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, SETTLE_RETRY_MS));
      }
    }
  }

  /** Puts transitions back (redrive): offered again from their first attempt, marked re-driven. */
  async send(transitions: Transition[], options: { redriven: boolean }): Promise<void> {
    for (const transition of transitions)
      await this.db.run(
        `INSERT INTO {s}.effects (name, version, transition, redriven) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name, version) DO UPDATE SET redriven = excluded.redriven, attempts = 0, first_attempt_at = NULL,
           next_attempt_at = 0, claimed_until = 0, last_error = NULL`,
        [transition.name, transition.version, JSON.stringify(transition), options.redriven],
      );
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}

/** The console's view of an operation's waiting effects, lowest version first (as SQLite's pendingEffects). */
export async function pendingEffects(
  db: Postgres,
  name: string,
): Promise<Array<{ version: number; receiveCount: number; retryAt: number; lastError: string | null }>> {
  const rows = await db.rows<{ version: number; attempts: number; last_error: string | null; next_attempt_at: string }>(
    'SELECT version, attempts, last_error, next_attempt_at FROM {s}.effects WHERE name = $1 ORDER BY version',
    [name],
  );
  return rows.map((row) => ({
    version: row.version,
    receiveCount: row.attempts,
    retryAt: Number(row.next_attempt_at),
    lastError: row.last_error,
  }));
}

/** The operations with an effect that failed at least once and waits to be tried again (`effects=retrying`). */
export async function retryingOperations(db: Postgres): Promise<string[]> {
  return (await db.rows<{ name: string }>('SELECT DISTINCT name FROM {s}.effects WHERE last_error IS NOT NULL')).map((row) => row.name);
}
