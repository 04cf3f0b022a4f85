/**
 * The outbox feed: this engine's table stream. Every applied write appended a
 * change row in its own transaction (operation-store.ts); the feed hands the
 * rows to each consumer (history, the effects queue) in order, and moves that
 * consumer's checkpoint in the same transaction as what the consumer wrote.
 * A crash anywhere loses nothing and repeats nothing: either the batch and
 * its checkpoint committed, or neither did.
 *
 * Changes are kept a day after they were written (DynamoDB keeps a stream
 * 24 hours; CHANGES_RETENTION_HOURS), so an effects sink turned on later
 * first delivers that day's state changes, as in AWS, and the change feed
 * (local/feed) reaches a day back.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { OperationChange } from '../../core/change.ts';
import type { Sqlite } from './sqlite.ts';

export interface Change {
  seq: number;
  name: string;
  version: number;
  writeKind: OperationChange['writeKind'];
  oldRecord: string | null;
  newRecord: string;
  /** Epoch milliseconds of the write. */
  at: number;
  /** The traceparent of the write's span, where one was traced. */
  trace?: string | null;
}

export interface OutboxConsumer {
  /** Its checkpoint's key. */
  readonly name: string;
  /** Takes changes, in order, inside the feed's transaction (synchronously: its writes commit with the checkpoint). */
  take(changes: Change[]): void;
  /** After that transaction committed. */
  taken?(): void;
}

const BATCH = 500;
/** How long the feed gathers changes before it hands them on (effect lag pays it once). */
const GATHER_MS = 2;
/** While the file cannot be written: the first retry, doubled up to the cap (a locked file must not keep the process busy). */
const RETRY_MS = 1_000;
const RETRY_CAP_MS = 30_000;

export class OutboxFeed {
  private scheduled = false;
  private timer?: NodeJS.Timeout;
  private retryMs = RETRY_MS;
  private stopped = false;

  constructor(
    private readonly db: Sqlite,
    private readonly consumers: OutboxConsumer[],
    private readonly logger: Logger,
    /** How long changes are kept (CHANGES_RETENTION_HOURS). */
    private readonly retentionMs: number,
  ) {}

  start(): void {
    this.wake();
  }

  /**
   * A drain soon, however often it is asked: after a few milliseconds, so that
   * under load one transaction hands on the changes of many deliveries.
   */
  wake(): void {
    if (this.scheduled || this.stopped) return;
    this.scheduled = true;
    setTimeout(() => {
      this.scheduled = false;
      this.drain();
    }, GATHER_MS);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private drain(): void {
    if (this.stopped) return;
    try {
      for (const consumer of this.consumers) while (this.feed(consumer) === BATCH && !this.stopped);
      this.retryMs = RETRY_MS;
    } catch (error) {
      // The file is busy, full or unwritable: the changes wait in the outbox.
      this.logger.error('outbox: changes not handed on yet; trying again', { error: (error as Error).message, retryInMs: this.retryMs });
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.wake(), this.retryMs);
      this.retryMs = Math.min(RETRY_CAP_MS, this.retryMs * 2);
    }
  }

  /** One batch to one consumer, with its checkpoint, in one transaction; how many changes it took. */
  private feed(consumer: OutboxConsumer): number {
    const count = this.db.writeDerived(() => {
      const changes = this.db
        .all<{
          seq: number;
          name: string;
          version: number;
          write_kind: Change['writeKind'];
          old_record: string | null;
          new_record: string;
          at: number;
          trace: string | null;
        }>('SELECT * FROM changes WHERE seq > ? ORDER BY seq LIMIT ?', this.checkpoint(consumer.name), BATCH)
        .map((row) => ({
          seq: row.seq,
          name: row.name,
          version: row.version,
          writeKind: row.write_kind,
          oldRecord: row.old_record,
          newRecord: row.new_record,
          at: row.at,
          trace: row.trace,
        }));
      const last = changes.at(-1);
      if (!last) return 0;
      consumer.take(changes);
      this.db.run(
        'INSERT INTO checkpoints (consumer, seq) VALUES (?, ?) ON CONFLICT (consumer) DO UPDATE SET seq = excluded.seq',
        consumer.name,
        last.seq,
      );
      return changes.length;
    });
    if (count > 0) consumer.taken?.();
    return count;
  }

  private checkpoint(consumer: string): number {
    return this.db.get<{ seq: number }>('SELECT seq FROM checkpoints WHERE consumer = ?', consumer)?.seq ?? 0;
  }

  /** Drops changes older than the retention that every consumer has taken. */
  prune(now = Date.now()): number {
    const taken = Math.min(...this.consumers.map((consumer) => this.checkpoint(consumer.name)));
    return this.db.writeDerived(() => this.db.run('DELETE FROM changes WHERE at < ? AND seq <= ?', now - this.retentionMs, taken).changes);
  }
}

/**
 * On a consumer's first start (no checkpoint yet): how many changes of
 * `writeKind` it will take first (the outbox keeps a day). Undefined once it
 * has a checkpoint. Read from the file, by whichever process asks.
 */
export function backlogOf(db: Sqlite, consumer: string, writeKind: Change['writeKind']): number | undefined {
  if (db.get('SELECT 1 FROM checkpoints WHERE consumer = ?', consumer)) return undefined;
  return db.get<{ n: number }>('SELECT count(*) AS n FROM changes WHERE write_kind = ?', writeKind)?.n ?? 0;
}
