/**
 * The change feed's port: every applied write, read by clients from a cursor
 * they hand back (`GET /changes`, its SSE stream, the client's `watch`), and
 * waits on one operation's next version (the long poll of `GET /operations/…`).
 * Each engine that serves a feed implements it over its change log: SQLite's
 * outbox (engines/sqlite/change-feed.ts), PostgreSQL's change log read by
 * every instance (engines/postgres/change-feed.ts).
 */
import type { OperationChange } from '../core/change.ts';
import type { OperationKind, OperationState, ProviderName } from '../core/lifecycle.ts';

export type { OperationChange };

export interface FeedFilter {
  name?: string;
  kind?: OperationKind;
  provider?: ProviderName;
  state?: OperationState;
}

/** A cursor the feed no longer holds (older than its retention, from another feed, or ahead of it). */
export class CursorExpiredError extends Error {
  override name = 'CursorExpiredError';
  constructor(
    message: string,
    /** The oldest cursor still good: reading after it returns every change the feed holds. */
    readonly oldestCursor: string,
  ) {
    super(message);
  }
}

export interface ChangeFeedPort {
  /** The cursor of the head: reading after it returns what changes from now on. */
  headCursor(): Promise<string>;
  /** Whether `text` has the form of this feed's cursors at all (not: a 400). */
  isCursor(text: string): boolean;
  /** Resolves when changes after `cursor` are held; CursorExpiredError when they are not. */
  check(cursor: string): Promise<void>;
  /**
   * Up to `limit` changes after `after` (the head without it) that match
   * `filter`, in the feed's order; when there are none, waits up to `waitMs`
   * for one. `cursor` goes on from there (past what was scanned without a match).
   */
  next(
    after: string | undefined,
    filter: FeedFilter,
    limit: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ changes: OperationChange[]; cursor: string }>;
  /** Resolves true once `name` has a version past `afterVersion` (default: its version now), false after `waitMs` or on `signal`. */
  versionPast(name: string, afterVersion: number | undefined, waitMs: number, signal?: AbortSignal): Promise<boolean>;
}
