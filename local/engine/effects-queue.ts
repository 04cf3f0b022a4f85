/**
 * The per-operation effects queue on the embedded engine, with the semantics
 * of the SQS FIFO queue and event source the AWS path uses, so the same
 * effects handler (lambda/effects/process.ts) runs on both: one message group
 * per operation, in order; a group with a message in flight or waiting out a
 * backoff delivers nothing else, while other groups go on; messages carry
 * ApproximateReceiveCount and ApproximateFirstReceiveTimestamp; the
 * handler's `retryAfter` is the visibility timeout; a message is deleted when
 * the handler does not report it failed.
 *
 * Fed by the outbox (state changes only) in the outbox's own transaction, and
 * kept in the same file, so a restart resumes where it stopped, backoffs
 * included. A message in flight at a crash is delivered again after the
 * restart, with the same `webhook-id` (the ledger skips what it recorded).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { DynamoDBRecord, SQSRecord } from 'aws-lambda';
import type { EffectsHandler } from '../../lambda/effects/process.ts';
import { LAST_ERROR_ATTRIBUTE, REDRIVEN_ATTRIBUTE, type RetryScheduler } from '../../lambda/effects/queue.ts';
import { effectsGroupOf } from '../../lambda/store/table.ts';
import { type Change, type OutboxConsumer, streamRecordOf } from './outbox.ts';
import type { Sqlite } from './sqlite.ts';

interface Message {
  seq: number;
  group: string;
  body: string;
  receiveCount: number;
  firstReceiveAt: number;
  /** When it may be received again after a failed attempt (0: now). */
  retryAt: number;
  redriven: boolean;
  /** What its last failed attempt came to, in words. */
  lastError?: string;
}

export interface EffectsQueueOptions {
  logger: Logger;
  /** Messages per handler invocation (each from another group), as the event source's batch size. */
  batchSize?: number;
  /** Invocations in flight at once. */
  concurrency?: number;
}

export class SqliteEffectsQueue implements RetryScheduler, OutboxConsumer {
  readonly name = 'effects';
  private readonly groups = new Map<string, Message[]>();
  private readonly busy = new Set<string>();
  private fresh: Message[] = [];
  private handler?: EffectsHandler;
  private inFlight = 0;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();
  /** While the file cannot be written: how long a batch waits before it is received again (doubled up to 30 s). */
  private stallMs = STALL_MS;

  constructor(
    private readonly db: Sqlite,
    private readonly options: EffectsQueueOptions,
  ) {}

  /** Loads what a previous run left, then delivers to `handler`. */
  start(handler: EffectsHandler): void {
    for (const row of this.db.all<{
      seq: number;
      grp: string;
      body: string;
      receive_count: number;
      first_receive_at: number;
      retry_at: number;
      redriven: number;
      last_error: string | null;
    }>('SELECT * FROM effect_messages ORDER BY seq')) {
      this.remember({
        seq: row.seq,
        group: row.grp,
        body: row.body,
        receiveCount: row.receive_count,
        firstReceiveAt: row.first_receive_at,
        retryAt: row.retry_at,
        redriven: row.redriven === 1,
        ...(row.last_error && { lastError: row.last_error }),
      });
    }
    this.handler = handler;
    this.pump();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.all(this.running);
  }

  /** The outbox's state changes become messages, inside the outbox's transaction. */
  take(changes: Change[]): void {
    for (const change of changes) {
      if (change.writeKind !== 'state-change') continue;
      this.fresh.push(this.insert(streamRecordOf(change), change.name, false));
    }
  }

  taken(): void {
    for (const message of this.fresh.splice(0)) this.remember(message);
    this.pump();
  }

  /** Re-driven transitions (their stream records), at the back of their operation's group. */
  async send(records: DynamoDBRecord[], options: { redriven?: boolean } = {}): Promise<void> {
    const messages = this.db.writeDerived(() =>
      records.map((record) => this.insert(record, record.dynamodb?.Keys?.name?.S ?? '', options.redriven ?? false)),
    );
    for (const message of messages) this.remember(message);
    this.pump();
  }

  private insert(record: DynamoDBRecord, name: string, redriven: boolean): Message {
    const body = JSON.stringify(record);
    const group = effectsGroupOf(name);
    const { lastInsertRowid } = this.db.run(
      'INSERT INTO effect_messages (grp, name, body, redriven) VALUES (?, ?, ?, ?)',
      group,
      name,
      body,
      redriven ? 1 : 0,
    );
    return { seq: Number(lastInsertRowid), group, body, receiveCount: 0, firstReceiveAt: 0, retryAt: 0, redriven };
  }

  /** A failed attempt: when it is offered again, and its attempt count (persisted only now: a delivered message is deleted). */
  async retryAfter(message: SQSRecord, delayMs: number, lastError?: string): Promise<void> {
    const [group, seq] = message.receiptHandle.split('|') as [string, string];
    const stored = this.groups.get(group)?.find((m) => m.seq === Number(seq));
    if (!stored) return;
    stored.retryAt = Date.now() + delayMs;
    if (lastError) stored.lastError = lastError.slice(0, 300);
    await this.db.writeGrouped(
      () =>
        this.db.run(
          'UPDATE effect_messages SET retry_at = ?, receive_count = ?, first_receive_at = ?, last_error = COALESCE(?, last_error) WHERE seq = ?',
          stored.retryAt,
          stored.receiveCount,
          stored.firstReceiveAt,
          lastError?.slice(0, 300) ?? null,
          stored.seq,
        ),
      'derived',
    );
  }

  private remember(message: Message): void {
    const messages = this.groups.get(message.group) ?? [];
    messages.push(message); // seq grows with every insert: the group stays in order
    this.groups.set(message.group, messages);
  }

  /** Starts invocations for groups whose head is due, then sleeps until the next one is. */
  private pump(): void {
    if (this.stopped || !this.handler) return;
    clearTimeout(this.timer);
    const { batchSize = 10, concurrency = 8 } = this.options;
    const now = Date.now();
    let nextDue = Number.POSITIVE_INFINITY;
    const due: Message[] = [];
    for (const [group, messages] of this.groups) {
      const head = messages[0];
      if (!head || this.busy.has(group)) continue;
      if (head.retryAt <= now) due.push(head);
      else nextDue = Math.min(nextDue, head.retryAt);
    }
    while (due.length > 0 && this.inFlight < concurrency) this.invoke(due.splice(0, batchSize));
    if (due.length > 0) return; // an invocation's end pumps again
    if (nextDue < Number.POSITIVE_INFINITY) this.timer = setTimeout(() => this.pump(), Math.max(0, nextDue - now));
  }

  private invoke(batch: Message[]): void {
    this.inFlight++;
    for (const message of batch) this.busy.add(message.group);
    const run = this.deliver(batch).finally(() => {
      this.inFlight--;
      for (const message of batch) this.busy.delete(message.group);
      this.running.delete(run);
      this.pump();
    });
    this.running.add(run);
  }

  private async deliver(batch: Message[]): Promise<void> {
    const now = Date.now();
    try {
      for (const message of batch) {
        message.receiveCount++;
        message.firstReceiveAt ||= now;
      }
      const { batchItemFailures } = await (this.handler as EffectsHandler)({ Records: batch.map(toSqsRecord) });
      const failed = new Set(batchItemFailures.map((f) => f.itemIdentifier));
      const done = batch.filter((message) => !failed.has(messageId(message)));
      await this.db.writeGrouped(() => {
        for (const message of done) this.db.run('DELETE FROM effect_messages WHERE seq = ?', message.seq);
      }, 'derived');
      for (const message of done) {
        const messages = this.groups.get(message.group) ?? [];
        messages.splice(messages.indexOf(message), 1);
        if (messages.length === 0) this.groups.delete(message.group);
      }
      this.stallMs = STALL_MS;
    } catch (error) {
      // As with a Lambda that throws (or a store that cannot be written): the whole batch is received again, after a pause.
      this.options.logger.error('effects queue: delivery failed; the batch is received again later', {
        error: (error as Error).message,
        retryInMs: this.stallMs,
      });
      for (const message of batch) message.retryAt = Date.now() + this.stallMs;
      this.stallMs = Math.min(STALL_CAP_MS, this.stallMs * 2);
    }
  }
}

const STALL_MS = 1_000;
const STALL_CAP_MS = 30_000;
const messageId = (message: Message) => `${message.group}|${message.seq}`;

/** The message as the SQS event source hands it to Lambda. */
function toSqsRecord(message: Message): SQSRecord {
  const seq = String(message.seq).padStart(20, '0');
  return {
    messageId: messageId(message),
    receiptHandle: messageId(message),
    body: message.body,
    attributes: {
      ApproximateReceiveCount: String(message.receiveCount),
      ApproximateFirstReceiveTimestamp: String(message.firstReceiveAt),
      SentTimestamp: String(message.firstReceiveAt),
      SenderId: 'ratchet',
      MessageGroupId: message.group,
      MessageDeduplicationId: seq,
      SequenceNumber: seq,
    },
    messageAttributes: {
      ...(message.redriven && { [REDRIVEN_ATTRIBUTE]: { stringValue: 'true', dataType: 'String' } }),
      ...(message.lastError && { [LAST_ERROR_ATTRIBUTE]: { stringValue: message.lastError, dataType: 'String' } }),
    },
    md5OfBody: '',
    eventSource: 'ratchet:effects-queue',
    eventSourceARN: 'ratchet:effects-queue',
    awsRegion: 'local',
  } as SQSRecord;
}

/**
 * What waits for one operation, in order: each message's version, attempts so
 * far and when it is tried next (the console). Read from the file, so any
 * process sees it; attempts are written at each failure, not at each try.
 */
export function pendingEffects(
  db: Sqlite,
  name: string,
): Array<{ version: number | undefined; receiveCount: number; retryAt: number; lastError: string | null }> {
  return db
    .all<{ body: string; receive_count: number; retry_at: number; last_error: string | null }>(
      'SELECT body, receive_count, retry_at, last_error FROM effect_messages WHERE grp = ? ORDER BY seq',
      effectsGroupOf(name),
    )
    .map((row) => {
      let version: number | undefined;
      try {
        version = Number((JSON.parse(row.body) as DynamoDBRecord).dynamodb?.NewImage?.version?.N);
      } catch {
        version = undefined;
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
