/**
 * The per-operation effects queue on the embedded engine: one queue per
 * operation, in version order; an operation whose first effect is in flight
 * or waiting out its backoff holds the rest of that operation back, while
 * every other operation goes on. Each effect is handed to the application's
 * delivery (app/effects/deliver.ts) as a pending effect, and what it
 * answers is done here: forget it, or offer it again after the backoff, its
 * outcome in words kept for the console.
 *
 * Fed by the outbox (state changes only) in the outbox's own transaction, and
 * kept in the same file, so a restart resumes where it stopped, backoffs
 * included. An effect in flight at a crash is offered again after the
 * restart, with the same id (the ledger skips what it recorded).
 */

import type { Logger } from '@aws-lambda-powertools/logger';
import type { DeadLetters } from '../../app/effects/dead-letters.ts';
import type { EffectOutcome, PendingEffect } from '../../app/effects/deliver.ts';
import { InvalidStreamRecordError, type Transition, transitionOf } from '../../app/effects/transition.ts';
import type { EffectBacklog } from '../../app/engine.ts';
import { EFFECT_WRITE_KINDS, sendsEffect } from '../../core/change.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import { sqlList } from '../sql/rows.ts';
import { legacyTransition } from './legacy-rows.ts';
import type { Change, OutboxConsumer } from './outbox.ts';
import type { Sqlite } from './sqlite.ts';

interface Message {
  seq: number;
  name: string;
  /** The operation's record (or a re-driven transition), as JSON. */
  body: string;
  receiveCount: number;
  firstReceiveAt: number;
  /** When it may be tried again after a failed attempt (0: now). */
  retryAt: number;
  redriven: boolean;
  /** What its last failed attempt came to, in words. */
  lastError?: string;
  /** The traceparent of the write that made it (OpenTelemetry on). */
  trace?: string;
}

export interface EffectsQueueOptions {
  logger: Logger;
  /** Effects delivered at once (each of another operation). */
  concurrency?: number;
  /** Where an effect that cannot be read goes (the dead letters' undecodable list): it holds nothing up. */
  parkUndecodable: DeadLetters['parkUndecodable'];
}

export type Deliver = (effect: PendingEffect) => Promise<EffectOutcome>;

interface Row {
  seq: number;
  name: string | null;
  body: string;
  receive_count: number;
  first_receive_at: number;
  retry_at: number;
  redriven: number;
  last_error: string | null;
  trace: string | null;
}

/** The queue's checkpoint in the outbox. */
const CONSUMER = 'effects';

export class SqliteEffectsQueue implements OutboxConsumer {
  readonly name = CONSUMER;
  /** Each operation's waiting effects, oldest first. */
  private readonly queues = new Map<string, Message[]>();
  private readonly busy = new Set<string>();
  private fresh: Message[] = [];
  private deliver?: Deliver;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();
  /** While the file cannot be written: how long an effect waits before it is tried again (doubled up to 30 s). */
  private stallMs = STALL_MS;

  constructor(
    private readonly db: Sqlite,
    private readonly options: EffectsQueueOptions,
  ) {}

  /** Loads what a previous run left, then delivers through `deliver`. */
  start(deliver: Deliver): void {
    for (const row of this.db.all<Row>('SELECT * FROM effect_messages ORDER BY seq')) this.remember(messageOf(row));
    this.deliver = deliver;
    this.pump();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.all(this.running);
  }

  /** The outbox's state changes become effects, inside the outbox's transaction. */
  take(changes: Change[]): void {
    for (const change of changes) {
      if (!sendsEffect(change.writeKind)) continue;
      this.fresh.push(this.insert(change.name, change.newRecord, false, change.trace ?? null));
    }
  }

  taken(): void {
    for (const message of this.fresh.splice(0)) this.remember(message);
    this.pump();
  }

  /** Re-driven transitions, at the back of their operation's queue. */
  async send(transitions: Transition[], options: { redriven?: boolean } = {}): Promise<void> {
    const messages = this.db.writeDerived(() =>
      transitions.map((transition) => this.insert(transition.name, JSON.stringify(transition), options.redriven ?? false)),
    );
    for (const message of messages) this.remember(message);
    this.pump();
  }

  private insert(name: string, body: string, redriven: boolean, trace: string | null = null): Message {
    const { lastInsertRowid } = this.db.run(
      'INSERT INTO effect_messages (grp, name, body, redriven, trace) VALUES (?, ?, ?, ?, ?)',
      name,
      name,
      body,
      redriven ? 1 : 0,
      trace,
    );
    return { seq: Number(lastInsertRowid), name, body, receiveCount: 0, firstReceiveAt: 0, retryAt: 0, redriven, ...(trace && { trace }) };
  }

  private remember(message: Message): void {
    const messages = this.queues.get(message.name) ?? [];
    messages.push(message); // seq grows with every insert: the queue stays in order
    this.queues.set(message.name, messages);
  }

  private forget(message: Message): void {
    const messages = this.queues.get(message.name) ?? [];
    messages.splice(messages.indexOf(message), 1);
    if (messages.length === 0) this.queues.delete(message.name);
  }

  /** Starts deliveries of the operations whose first effect is due, then sleeps until the next one is. */
  private pump(): void {
    if (this.stopped || !this.deliver) return;
    clearTimeout(this.timer);
    const { concurrency = 8 } = this.options;
    const now = Date.now();
    let nextDue = Number.POSITIVE_INFINITY;
    for (const [name, messages] of this.queues) {
      if (this.running.size >= concurrency) return; // a delivery's end pumps again
      const head = messages[0];
      if (!head || this.busy.has(name)) continue;
      if (head.retryAt > now) {
        nextDue = Math.min(nextDue, head.retryAt);
        continue;
      }
      this.busy.add(name);
      const run = this.attempt(head).finally(() => {
        this.busy.delete(name);
        this.running.delete(run);
        this.pump();
      });
      this.running.add(run);
    }
    if (nextDue < Number.POSITIVE_INFINITY) this.timer = setTimeout(() => this.pump(), Math.max(0, nextDue - now));
  }

  private async attempt(message: Message): Promise<void> {
    const now = Date.now();
    message.receiveCount++;
    message.firstReceiveAt ||= now;
    try {
      let transition: Transition;
      try {
        transition = transitionOfBody(message.body);
      } catch (error) {
        // Nothing will ever read it: set aside raw, at once, holding nothing up.
        await this.options.parkUndecodable(
          { sequence: String(message.seq), name: message.name || null, raw: parsedOr(message.body) },
          (error as Error).message,
        );
        this.options.logger.error('effect undecodable; dead-lettered with its raw body', {
          seq: message.seq,
          detail: (error as Error).message,
        });
        return await this.remove(message);
      }
      const outcome = await (this.deliver as Deliver)({
        transition,
        attempt: message.receiveCount,
        firstAttemptAtMs: message.firstReceiveAt,
        ...(message.lastError && { earlierFailure: message.lastError }),
        redriven: message.redriven,
        ...(message.trace && { traceparent: message.trace }),
      });
      if (outcome.kind === 'done') await this.remove(message);
      else await this.retryLater(message, outcome.inMs, outcome.lastError);
      this.stallMs = STALL_MS;
    } catch (error) {
      // The file cannot be written (or read): the effect waits, and is tried again after a pause.
      this.options.logger.error('effects queue: delivery not finished; tried again later', {
        error: (error as Error).message,
        retryInMs: this.stallMs,
      });
      message.retryAt = Date.now() + this.stallMs;
      this.stallMs = Math.min(STALL_CAP_MS, this.stallMs * 2);
    }
  }

  private async remove(message: Message): Promise<void> {
    await this.db.writeGrouped(() => this.db.run('DELETE FROM effect_messages WHERE seq = ?', message.seq), 'derived');
    this.forget(message);
  }

  /** A failed attempt: when it is offered again, its attempt count and what it came to (persisted only now: a delivered effect is deleted). */
  private async retryLater(message: Message, delayMs: number, lastError: string): Promise<void> {
    message.retryAt = Date.now() + delayMs;
    message.lastError = lastError.slice(0, 300);
    await this.db.writeGrouped(
      () =>
        this.db.run(
          'UPDATE effect_messages SET retry_at = ?, receive_count = ?, first_receive_at = ?, last_error = ? WHERE seq = ?',
          message.retryAt,
          message.receiveCount,
          message.firstReceiveAt,
          message.lastError,
          message.seq,
        ),
      'derived',
    );
  }
}

const STALL_MS = 1_000;
const STALL_CAP_MS = 30_000;

function messageOf(row: Row): Message {
  return {
    seq: row.seq,
    name: row.name ?? '',
    body: row.body,
    receiveCount: row.receive_count,
    firstReceiveAt: row.first_receive_at,
    retryAt: row.retry_at,
    redriven: row.redriven === 1,
    ...(row.last_error && { lastError: row.last_error }),
    ...(row.trace && { trace: row.trace }),
  };
}

/** An effect's transition: from the record it holds, or (a row queued by Ratchet 0.1) from the stream record it held. */
function transitionOfBody(body: string): Transition {
  const parsed = JSON.parse(body) as OperationRecord & { dynamodb?: unknown };
  if (parsed && typeof parsed === 'object' && 'dynamodb' in parsed) return legacyTransition(parsed);
  return transitionOf(parsed, 'the queued effect');
}

function parsedOr(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    return body;
  }
}

/**
 * What waits for one operation, in order: each effect's version, attempts so
 * far, when it is tried next and what its last attempt came to (the console).
 * Read from the file, so any process sees it; attempts are written at each
 * failure, not at each try.
 */
export function pendingEffects(
  db: Sqlite,
  name: string,
): Array<{ version: number | undefined; receiveCount: number; retryAt: number; lastError: string | null }> {
  return db
    .all<{ body: string; receive_count: number; retry_at: number; last_error: string | null }>(
      'SELECT body, receive_count, retry_at, last_error FROM effect_messages WHERE name = ? ORDER BY seq',
      name,
    )
    .map((row) => {
      let version: number | undefined;
      try {
        version = transitionOfBody(row.body).version;
      } catch (error) {
        if (!(error instanceof InvalidStreamRecordError) && !(error instanceof SyntaxError)) throw error;
      }
      return { version, receiveCount: row.receive_count, retryAt: row.retry_at, lastError: row.last_error };
    });
}

/** The operations with an effect that failed at least once and waits to be tried again (`effects=retrying`). */
export function retryingOperations(db: Sqlite): string[] {
  return db
    .all<{ name: string }>('SELECT DISTINCT name FROM effect_messages WHERE receive_count > 0 AND name IS NOT NULL')
    .map((r) => r.name);
}

/**
 * Per sink: effects waiting that its ledger does not hold yet (the outbox's
 * state changes the effects queue has not read yet included), those of them
 * whose last attempt failed, and the dead letters it never took.
 */
export function effectBacklog(db: Sqlite, sinks: string[]): EffectBacklog[] {
  const unread =
    db.get<{ n: number }>(
      `SELECT count(*) AS n FROM changes
       WHERE seq > coalesce((SELECT seq FROM checkpoints WHERE consumer = ?), 0) AND write_kind IN (${sqlList(EFFECT_WRITE_KINDS)})`,
      CONSUMER,
    )?.n ?? 0;
  const untaken = "NOT EXISTS (SELECT 1 FROM effect_ledger l WHERE l.key = ? || '#' || m.name || '#' || json_extract(m.body, '$.version'))";
  return sinks.map((sink) => {
    const row = db.get<{ pending: number; retrying: number; dead: number }>(
      `SELECT (SELECT count(*) FROM effect_messages m WHERE ${untaken}) AS pending,
         (SELECT count(*) FROM effect_messages m WHERE m.receive_count > 0 AND ${untaken}) AS retrying,
         (SELECT count(*) FROM dead_letters d WHERE d.status = 'dead'
            AND NOT EXISTS (SELECT 1 FROM effect_ledger l WHERE l.key = ? || '#' || json_extract(d.letter, '$.idempotencyKey'))) AS dead`,
      sink,
      sink,
      sink,
    );
    return { sink, pending: (row?.pending ?? 0) + unread, retrying: row?.retrying ?? 0, deadLettered: row?.dead ?? 0 };
  });
}
