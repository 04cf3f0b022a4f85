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
 * instances never deliver one effect at once. Every lease is stamped and
 * compared with the database's clock inside its statement (clock.ts): an
 * instance whose own clock runs ahead or behind takes nothing another holds.
 * Claims take rows with `FOR UPDATE SKIP LOCKED`: two instances are never
 * handed the same effect.
 *
 * Each claimed effect goes to the application's delivery (app/effects/deliver.ts);
 * done, its row is deleted (the next version of its operation comes up);
 * retry, it waits out the backoff with its outcome in words kept for the console.
 *
 * In batches, not per effect: one statement claims many, and hands back with
 * each what its delivery would otherwise ask one at a time (whether a dead
 * letter holds it back, which sinks' ledger rows it has). A delivery's ledger
 * rows are written with its settle, and settles that come while one is on its
 * way go together in the next statement (engines/sql/coalescer.ts): with the
 * database a network hop away, an effect costs a fraction of a round trip,
 * not four.
 */

import { performance } from 'node:perf_hooks';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { DeliveryDeps, EffectOutcome, PendingEffect } from '../../app/effects/deliver.ts';
import { type DeliveryAttempts, LEDGER_RETENTION_SECONDS } from '../../app/effects/ledger.ts';
import type { Transition } from '../../app/effects/transition.ts';
import type { EffectBacklog } from '../../app/engine.ts';
import { type AnswerNow, Coalescer } from '../sql/coalescer.ts';
import { DB_NOW_MS } from './clock.ts';
import type { Postgres } from './database.ts';
import { PostgresDeadLetters } from './records.ts';

/** What one delivery reads and writes of the records, answered from its claim and written with its settle. */
export type ClaimRecords = Pick<DeliveryDeps, 'ledger' | 'deadLetters'>;

export type Deliver = (effect: PendingEffect, records: ClaimRecords) => Promise<EffectOutcome>;

export interface PostgresEffectsQueueOptions {
  logger: Pick<Logger, 'error' | 'warn'>;
  /** Effects delivered at once by this instance (each of another operation; default 16). */
  concurrency?: number;
  /** How long a claim holds unless renewed (default 5 s; renewed while its delivery runs). */
  leaseMs?: number;
  /** How often an idle instance looks for effects other instances' writes queued (default 250 ms; a local write wakes it at once). */
  pollMs?: number;
  /** The sinks' names: a claim reads which of them have delivered each effect already. */
  sinks?: readonly string[];
  /** The database's time as this instance knows it (clock.ts), for the ledger's timestamps; default this process's clock. */
  clock?: () => number;
}

interface EffectRow {
  name: string;
  version: number;
  transition: string;
  attempts: number;
  first_attempt_at: string;
  redriven: boolean;
  last_error: string | null;
  trace: string | null;
  /** The lease this claim holds until (the database's epoch ms): it names the claim, so only its holder settles or releases it. */
  claimed_until: string;
  /** When this instance sent the claim (its monotonic ms): the lease ends no sooner than `leaseMs` after it. */
  sentAt: number;
  /** An earlier version of its operation is dead-lettered (not being re-driven). */
  held_back: boolean;
  /** The sinks whose ledger has it. */
  delivered: string[];
}

/** A claim's end, waiting for the next settle statement. */
interface Settle {
  name: string;
  version: number;
  /** The claim's `claimed_until`: only its holder's settle matches. */
  token: string;
  /** When its lease ends at the latest, by this instance's monotonic clock: a settle is not tried past it. */
  leaseEnd: number;
  outcome: 'done' | 'retry' | 'release';
  /** A retry's backoff: tried again this long after the settle, by the database's clock. */
  retryInMs: number | null;
  lastError: string | null;
  /** Ledger rows of the sinks that took it (`sink#name#version`). */
  delivered: Array<{ key: string; attempts: DeliveryAttempts | undefined }>;
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
  private readonly deadLetters: PostgresDeadLetters;
  /** Claims' ends: one settle statement on its way, those that end meanwhile in the next. */
  private readonly settles = new Coalescer<Settle, undefined>((batch, answer) => this.settle(batch, answer));

  constructor(
    private readonly db: Postgres,
    private readonly options: PostgresEffectsQueueOptions,
  ) {
    this.concurrency = options.concurrency ?? 16;
    this.leaseMs = options.leaseMs ?? 5_000;
    this.pollMs = options.pollMs ?? 250;
    this.deadLetters = new PostgresDeadLetters(db);
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
   *
   * Up to `concurrency` deliveries run at once, and the queue is claimed
   * again as soon as half of them are free (not when the slowest of a batch
   * ends): claims stay batches, and the pipeline stays full.
   */
  async drain(deliver: Deliver, deadlineMs: number): Promise<number> {
    let settled = 0;
    const running = new Set<Promise<void>>();
    let dry = false;
    while (Date.now() < deadlineMs && !this.stopped) {
      const room = this.concurrency - running.size;
      if (!dry && (running.size === 0 || room >= this.concurrency / 2)) {
        // What ran when the claim was sent: a delivery settled while the claim was on its way may have freed its
        // operation's next version after the claim's snapshot was taken, so the claim did not see it.
        const runningAtClaim = running.size;
        const claimed = await this.claim(room);
        for (const row of claimed) {
          const offered: Promise<void> = this.offer(row, deliver).finally(() => running.delete(offered));
          running.add(offered);
        }
        settled += claimed.length;
        // Fewer than asked: nothing more is ready until a delivery settles (the next version of its operation).
        dry = claimed.length < room;
        if (running.size === 0) {
          // Nothing was running when the claim was sent: nothing is ready. Else the deliveries that ran settled
          // meanwhile: claim again, with a snapshot taken after them.
          if (runningAtClaim === 0) break;
          dry = false;
          continue;
        }
        if (!dry) continue;
      }
      await Promise.race(running);
      dry = false;
    }
    await Promise.all(running);
    return settled;
  }

  /**
   * Up to `limit` effects, each its operation's lowest version, ready and
   * unclaimed, claimed for the lease, each with whether a dead letter holds it
   * back and which sinks delivered it already.
   */
  async claim(limit: number): Promise<EffectRow[]> {
    const sentAt = performance.now();
    const { rows } = await this.db.prepared<Omit<EffectRow, 'sentAt'>>(
      'claim',
      `WITH clock AS (SELECT ${DB_NOW_MS} AS now),
       ready AS (
         SELECT e.name, e.version FROM {s}.effects e, clock
         WHERE e.next_attempt_at <= clock.now AND e.claimed_until <= clock.now
           AND NOT EXISTS (SELECT 1 FROM {s}.effects p WHERE p.name = e.name AND p.version < e.version)
         ORDER BY e.next_attempt_at LIMIT $1
         FOR UPDATE OF e SKIP LOCKED
       )
       UPDATE {s}.effects e SET claimed_until = clock.now + $2::bigint, attempts = e.attempts + 1,
         first_attempt_at = coalesce(e.first_attempt_at, clock.now)
       FROM ready, clock WHERE e.name = ready.name AND e.version = ready.version
       RETURNING e.name, e.version, e.transition, e.attempts, e.first_attempt_at, e.redriven, e.last_error, e.claimed_until, e.trace,
         EXISTS (SELECT 1 FROM {s}.dead_letters d WHERE d.operation = e.name AND d.status = 'dead'
           AND d.entry < 'v' || lpad(e.version::text, 12, '0')) AS held_back,
         ARRAY(SELECT sink FROM unnest($3::text[]) AS sink
           WHERE EXISTS (SELECT 1 FROM {s}.effect_ledger l WHERE l.key = sink || '#' || e.name || '#' || e.version)) AS delivered`,
      [limit, this.leaseMs, this.options.sinks ?? []],
    );
    return rows.map((row) => ({ ...row, sentAt }));
  }

  private async offer(row: EffectRow, deliver: Deliver): Promise<void> {
    const claim = this.keep(row);
    const delivered: Settle['delivered'] = [];
    const records: ClaimRecords = {
      ledger: {
        isDelivered: async (sink) => row.delivered.includes(sink),
        markDelivered: async (sink, key, attempts) => {
          delivered.push({ key: `${sink}#${key}`, attempts });
        },
      },
      deadLetters: {
        holdsBack: async () => row.held_back,
        put: (letter) => this.deadLetters.put(letter),
        remove: (name, version) => this.deadLetters.remove(name, version),
      },
    };
    let outcome: EffectOutcome | undefined;
    try {
      outcome = await deliver(
        {
          transition: JSON.parse(row.transition) as Transition,
          attempt: row.attempts,
          firstAttemptAtMs: Number(row.first_attempt_at),
          ...(row.last_error && { earlierFailure: row.last_error }),
          redriven: row.redriven,
          signal: claim.signal,
          ...(row.trace && { traceparent: row.trace }),
        },
        records,
      );
    } catch (error) {
      // The delivery's own records could not be written (the database away, restarting): the claim is released as
      // soon as the database answers again, so the effect comes up again then, not at the end of its lease.
      this.options.logger.warn('effects queue: a delivery could not be settled; its claim is released once the database answers', {
        error,
      });
    }
    const { token, leaseEnd } = await claim.end();
    await this.settles.push({
      name: row.name,
      version: row.version,
      token,
      leaseEnd,
      outcome: outcome?.kind ?? 'release',
      retryInMs: outcome?.kind === 'retry' ? outcome.inMs : null,
      lastError: outcome?.kind === 'retry' ? outcome.lastError : null,
      delivered,
    });
  }

  /**
   * Keeps `row`'s claim while its delivery runs: a fifth of the lease apart it
   * looks, renews the lease once less than three fifths of it is left, and
   * aborts the delivery's signal when the claim was taken over, or when the
   * lease is about to end unrenewed (the database away). `end` stops it and
   * gives the claim's latest `claimed_until`, which names it for the settle.
   *
   * The database stamps each lease; this instance counts its end from when it
   * sent the statement that took it, which is earlier, so its own clock, right
   * or wrong, only ever stops a delivery before the lease others read ends.
   */
  private keep(row: EffectRow): { signal: AbortSignal; end(): Promise<{ token: string; leaseEnd: number }> } {
    const controller = new AbortController();
    let token = row.claimed_until;
    let leaseEnd = row.sentAt + this.leaseMs;
    let renewing: Promise<void> | undefined;
    const tickMs = Math.max(50, Math.floor(this.leaseMs / 5));
    const renew = async () => {
      const sentAt = performance.now();
      try {
        const [renewed] = await this.db.rows<{ claimed_until: string }>(
          `UPDATE {s}.effects SET claimed_until = ${DB_NOW_MS} + $4::bigint
           WHERE name = $1 AND version = $2 AND claimed_until = $3 RETURNING claimed_until`,
          [row.name, row.version, token, this.leaseMs],
        );
        if (renewed) {
          token = renewed.claimed_until;
          leaseEnd = sentAt + this.leaseMs;
        } else controller.abort(new Error('its claim was taken over (its lease ran out)'));
      } catch {
        // The database away: the next tick tries again, and stops the delivery if the lease is about to end.
      }
    };
    const timer = setInterval(() => {
      const left = leaseEnd - performance.now();
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
        return { token, leaseEnd };
      },
    };
  }

  /**
   * Settles every claim that ended, in one statement (those that end
   * meanwhile go in the next). A statement the database does not take is
   * tried again every half second for the claims whose lease still runs; a
   * claim whose lease ends (it frees its effect anyway), or every claim once
   * the queue stops, is answered at once and given up. Only a claim's own
   * holder matches `claimed_until`: a lease that ran out and was claimed
   * again is left alone. Ledger rows are written whatever the claim: a sink
   * took it.
   */
  private async settle(settles: Settle[], answer: AnswerNow<Settle, undefined>): Promise<undefined[]> {
    let batch = settles;
    for (;;) {
      try {
        await this.settleAll(batch);
        break;
      } catch (error) {
        const live = batch.filter((settle) => !this.stopped && performance.now() + SETTLE_RETRY_MS < settle.leaseEnd);
        if (live.length < batch.length)
          this.options.logger.warn('effects queue: a claim could not be settled; its lease frees it', {
            error,
            // Named: a sink may have taken one, and the next claim, not knowing, offers it again (with its id).
            effects: batch.filter((settle) => !live.includes(settle)).map((settle) => `${settle.name}#${settle.version}`),
          });
        for (const settle of batch) if (!live.includes(settle)) answer(settle, undefined);
        batch = live;
        if (batch.length === 0) break;
        await new Promise((resolve) => setTimeout(resolve, SETTLE_RETRY_MS));
      }
    }
    return settles.map(() => undefined);
  }

  private async settleAll(settles: Settle[]): Promise<void> {
    const now = new Date((this.options.clock ?? Date.now)());
    const ledger = settles.flatMap((settle) => settle.delivered);
    await this.db.prepared(
      'settle',
      `WITH settled AS (
         SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::text[], $5::bigint[], $6::text[])
           AS s(name, version, token, outcome, retry_in, last_error)),
       recorded AS (
         INSERT INTO {s}.effect_ledger (key, delivered_at, expires_at, attempts, earlier_failure)
         SELECT key, $10, $11, attempts, earlier_failure FROM unnest($7::text[], $8::int[], $9::text[]) AS l(key, attempts, earlier_failure)
         ON CONFLICT (key) DO NOTHING),
       done AS (
         DELETE FROM {s}.effects e USING settled s
         WHERE s.outcome = 'done' AND e.name = s.name AND e.version = s.version AND e.claimed_until = s.token)
       UPDATE {s}.effects e SET claimed_until = 0,
         next_attempt_at = CASE WHEN s.outcome = 'retry' THEN ${DB_NOW_MS} + s.retry_in ELSE e.next_attempt_at END,
         last_error = CASE WHEN s.outcome = 'retry' THEN s.last_error ELSE e.last_error END
       FROM settled s WHERE s.outcome <> 'done' AND e.name = s.name AND e.version = s.version AND e.claimed_until = s.token`,
      [
        settles.map((s) => s.name),
        settles.map((s) => s.version),
        settles.map((s) => s.token),
        settles.map((s) => s.outcome),
        settles.map((s) => s.retryInMs),
        settles.map((s) => s.lastError),
        ledger.map((l) => l.key),
        ledger.map((l) => l.attempts?.attempts ?? null),
        ledger.map((l) => l.attempts?.earlierFailure ?? null),
        now.toISOString(),
        Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS,
      ],
    );
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
  // Its next try as this instance's clock reads it (the console says "in 3 s"): how far off it is by the database's.
  const rows = await db.rows<{ version: number; attempts: number; last_error: string | null; next_attempt_at: string; retry_in: string }>(
    `SELECT version, attempts, last_error, next_attempt_at, next_attempt_at - ${DB_NOW_MS} AS retry_in
     FROM {s}.effects WHERE name = $1 ORDER BY version`,
    [name],
  );
  return rows.map((row) => ({
    version: row.version,
    receiveCount: row.attempts,
    retryAt: Number(row.next_attempt_at) === 0 ? 0 : Date.now() + Number(row.retry_in),
    lastError: row.last_error,
  }));
}

/** The operations with an effect that failed at least once and waits to be tried again (`effects=retrying`). */
export async function retryingOperations(db: Postgres): Promise<string[]> {
  return (await db.rows<{ name: string }>('SELECT DISTINCT name FROM {s}.effects WHERE last_error IS NOT NULL')).map((row) => row.name);
}

/**
 * Per sink: effects waiting that its ledger does not hold yet, those of them
 * whose last attempt failed, and the dead letters it never took. The queue
 * holds what is in flight (rows leave it once settled), so this reads little.
 */
export async function effectBacklog(db: Postgres, sinks: string[]): Promise<EffectBacklog[]> {
  const untaken = (name: string, version: string) =>
    `NOT EXISTS (SELECT 1 FROM {s}.effect_ledger l WHERE l.key = s.sink || '#' || ${name} || '#' || ${version})`;
  const rows = await db.rows<{ sink: string; pending: string; retrying: string; dead: string }>(
    `SELECT s.sink,
       (SELECT count(*) FROM {s}.effects e WHERE ${untaken('e.name', 'e.version')}) AS pending,
       (SELECT count(*) FROM {s}.effects e WHERE e.last_error IS NOT NULL AND ${untaken('e.name', 'e.version')}) AS retrying,
       (SELECT count(*) FROM {s}.dead_letters d WHERE d.status = 'dead'
          AND NOT EXISTS (SELECT 1 FROM {s}.effect_ledger l WHERE l.key = s.sink || '#' || (d.letter::jsonb ->> 'idempotencyKey'))) AS dead
     FROM unnest($1::text[]) AS s(sink)`,
    [sinks],
  );
  return rows.map((row) => ({
    sink: row.sink,
    pending: Number(row.pending),
    retrying: Number(row.retrying),
    deadLettered: Number(row.dead),
  }));
}
