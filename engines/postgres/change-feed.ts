/**
 * The change feed on PostgreSQL (app/feed.ts): the change log (change-log.ts)
 * read by clients of any instance, with the same cursors everywhere.
 *
 * Waiters wake when this instance commits (`notify`), when another instance's
 * commit is announced (`LISTEN`, where the connection allows it: see
 * listener.ts), and, whatever else, on a short poll of the log's head while
 * anyone waits (through a transaction pooler that poll is what wakes them). A
 * woken waiter reads its own query again; nothing is read while nobody waits.
 */
import { type ChangeFeedPort, CursorExpiredError, type FeedFilter } from '../../app/feed.ts';
import { changeOf, type OperationChange } from '../../core/change.ts';
import { providerOf } from '../../core/lifecycle.ts';
import { kindOfName } from '../../core/names.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import { CHANGE_CURSOR, changesAfter, headCursor, PRUNED_NOTE } from './change-log.ts';
import type { Postgres } from './database.ts';

/** Rows one read looks at, at most, when a filter matches few (the reader goes on from the cursor it is given). */
const SCAN_LIMIT = 2_000;

export interface PostgresFeedOptions {
  /** How often the head is read while someone waits (default 100 ms). */
  pollMs?: number;
}

export class PostgresChangeFeed implements ChangeFeedPort {
  private waiting = 0;
  private wakeAll?: () => void;
  private woken = new Promise<void>((resolve) => {
    this.wakeAll = resolve;
  });
  private poller?: NodeJS.Timeout;
  private lastHead?: string;
  private readonly pollMs: number;

  constructor(
    private readonly db: Postgres,
    options: PostgresFeedOptions = {},
  ) {
    this.pollMs = options.pollMs ?? 100;
  }

  /** Something was committed (here, or announced from another instance): every waiter reads again. */
  notify(): void {
    const wake = this.wakeAll;
    this.woken = new Promise<void>((resolve) => {
      this.wakeAll = resolve;
    });
    wake?.();
  }

  async headCursor(): Promise<string> {
    return headCursor(this.db);
  }

  isCursor(text: string): boolean {
    return CHANGE_CURSOR.test(text);
  }

  async check(cursor: string): Promise<void> {
    const [pruned, head] = await Promise.all([this.prunedThrough(), this.headCursor()]);
    if (pruned && compare(cursor, pruned) < 0)
      throw new CursorExpiredError(
        'changes after this cursor are no longer kept (the feed keeps a day): read again, then go on from the oldest cursor',
        pruned,
      );
    if (compare(cursor, head) > 0)
      throw new CursorExpiredError(
        'this cursor is ahead of the feed (the database was restored from a backup?): read again',
        pruned ?? '0.0',
      );
  }

  async next(
    after: string | undefined,
    filter: FeedFilter,
    limit: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ changes: OperationChange[]; cursor: string }> {
    let cursor = after ?? (await this.headCursor());
    if (after !== undefined) await this.check(after);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const woken = this.woken;
      const page = await this.read(cursor, filter, limit);
      cursor = page.cursor;
      if (page.changes.length > 0 || !page.complete || Date.now() >= deadline || signal?.aborted) return { changes: page.changes, cursor };
      await this.wait(woken, deadline - Date.now(), signal);
    }
  }

  async versionPast(name: string, afterVersion: number | undefined, waitMs: number, signal?: AbortSignal): Promise<boolean> {
    if (waitMs <= 0 || signal?.aborted) return false;
    const versionOf = async () =>
      (await this.db.rows<{ version: number }>('SELECT version FROM {s}.operations WHERE name = $1', [name]))[0]?.version ?? 0;
    const since = afterVersion ?? (await versionOf());
    const deadline = Date.now() + waitMs;
    for (;;) {
      const woken = this.woken;
      if ((await versionOf()) > since) return true;
      if (Date.now() >= deadline || signal?.aborted) return false;
      await this.wait(woken, deadline - Date.now(), signal);
    }
  }

  /** Matching changes after `cursor`, and how far it read (`complete`: up to the head). */
  private async read(
    cursor: string,
    filter: FeedFilter,
    limit: number,
  ): Promise<{ changes: OperationChange[]; cursor: string; complete: boolean }> {
    const changes: OperationChange[] = [];
    let scanned = 0;
    let at = cursor;
    while (scanned < SCAN_LIMIT) {
      const page = await changesAfter(this.db, at, Math.min(500, SCAN_LIMIT - scanned), filter.name);
      if (page.changes.length === 0) return { changes, cursor: at, complete: true };
      for (const row of page.changes) {
        scanned++;
        at = row.cursor;
        if (filter.kind && kindOfName(row.name) !== filter.kind) continue;
        if (filter.provider && providerOf(kindOfName(row.name)) !== filter.provider) continue;
        const change = changeOf(JSON.parse(row.newRecord) as OperationRecord, row.cursor, row.at.toISOString());
        if (filter.state && change.state !== filter.state) continue;
        changes.push(change);
        if (changes.length === limit) return { changes, cursor: at, complete: false };
      }
    }
    return { changes, cursor: at, complete: false };
  }

  /** Until `woken` resolves (a commit), `ms` pass, or `signal` aborts; polls the head meanwhile. */
  private async wait(woken: Promise<void>, ms: number, signal?: AbortSignal): Promise<void> {
    this.waiting++;
    this.startPolling();
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      await Promise.race([
        woken,
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, Math.max(0, ms));
        }),
        new Promise<void>((resolve) => {
          onAbort = resolve;
          signal?.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
      if (--this.waiting === 0) this.stopPolling();
    }
  }

  private startPolling(): void {
    if (this.poller) return;
    this.poller = setInterval(() => {
      headCursor(this.db)
        .then((head) => {
          if (head !== this.lastHead) {
            this.lastHead = head;
            this.notify();
          }
        })
        .catch(() => undefined); // the database away: the waiters' own reads say so
    }, this.pollMs);
    this.poller.unref();
  }

  private stopPolling(): void {
    clearInterval(this.poller);
    this.poller = undefined;
  }

  private async prunedThrough(): Promise<string | undefined> {
    const [row] = await this.db.rows<{ value: string }>('SELECT value FROM {s}.notes WHERE key = $1', [PRUNED_NOTE]);
    return row?.value;
  }

  close(): void {
    this.stopPolling();
    this.notify();
  }
}

/** Orders two cursors (`<tx>.<seq>`) as the log does. */
function compare(a: string, b: string): number {
  const [at, as] = a.split('.').map(BigInt) as [bigint, bigint];
  const [bt, bs] = b.split('.').map(BigInt) as [bigint, bigint];
  return at !== bt ? (at < bt ? -1 : 1) : as === bs ? 0 : as < bs ? -1 : 1;
}

export type { OperationChange };
