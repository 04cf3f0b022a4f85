/**
 * The change feed: the outbox (engines/sqlite/outbox.ts) read by clients, in
 * commit order, from a cursor they hand back. Every applied write of every
 * operation is one change there, appended in the write's own transaction, so
 * a reader that keeps its cursor sees each change once, in order, and none is
 * skipped: a cursor older than the outbox keeps (a day) is refused with the
 * oldest one still good (CursorExpiredError), never read past.
 *
 * Waiting costs nothing per waiter while nothing changes. After each commit
 * (the store's onChange) one read of the new rows is handed to every waiter
 * whose filter they match: waiters are kept by the operation or the kind
 * they ask for, so a row reaches only those it can concern, and a record is
 * parsed only when a waiter matches it. Nothing is read when nobody waits. The
 * latest few thousand changes stay parsed in memory, one object each, so
 * that readers near the head (streams, watchers going on from their cursor)
 * cost no query and every stream sends the same serialised event.
 *
 * A cursor is `<feed id>-<seq>`: the id is this data file's own (kept in
 * `notes`), so a cursor from another data folder is refused, not misread.
 */
import { randomBytes } from 'node:crypto';
import { type ChangeFeedPort, CursorExpiredError, type FeedFilter } from '../../app/feed.ts';
import { changeOf, type OperationChange } from '../../core/change.ts';
import { type OperationKind, providerOf } from '../../core/lifecycle.ts';
import { kindOfName } from '../../core/names.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import type { Change } from './outbox.ts';
import type { Sqlite } from './sqlite.ts';

export interface FeedPage {
  changes: OperationChange[];
  /** Where the reader is now: past every change returned, and past what it scanned without a match. */
  cursor: string;
}

/** How many rows one read looks at, at most, when a filter matches few (the reader then goes on from the cursor it is given). */
const SCAN_LIMIT = 5_000;
/** About how many of the latest changes are kept parsed in memory for readers near the head. */
const RECENT = 5_000;
/** Rows handed to waiters per round after a commit. */
const DISPATCH_BATCH = 1_000;
const CURSOR = /^([0-9a-f]{8})-(\d{1,15})$/;

interface Row {
  seq: number;
  name: string;
  version: number;
  write_kind: Change['writeKind'];
  new_record: string;
  at: number;
}

/** A row of the outbox, its kind known, its record parsed once when a reader first needs it. */
interface Entry {
  seq: number;
  name: string;
  kind: OperationKind;
  version: number;
  row: Row;
  change?: OperationChange;
}

const entryOf = (row: Row): Entry => ({ seq: row.seq, name: row.name, kind: kindOfName(row.name), version: row.version, row });

interface Waiter {
  /** Changes after this seq are new to it. */
  after: number;
  filter: FeedFilter;
  limit: number;
  /** A per-operation wait: only a version past this counts. */
  afterVersion?: number;
  found: OperationChange[];
  /** The last seq looked at for it. */
  scanned: number;
  /** A per-operation wait ended by news that is no change (its polling stopped): the caller reads again. */
  woken?: boolean;
  settle: () => void;
}

export class ChangeFeed {
  readonly id: string;
  /** Waiters on one operation, by its name. */
  private readonly named = new Map<string, Set<Waiter>>();
  /** The other waiters, by the kind they ask for (`*`: every kind). */
  private readonly byKind = new Map<OperationKind | '*', Set<Waiter>>();
  private waiting = 0;
  /** Every row up to here has been handed to the waiters then waiting. */
  private dispatched = 0;
  private scheduled = false;
  /** The latest changes, from seq `recentFirst` on, each parsed once when first needed (see remember). */
  private recent: Entry[] = [];
  private recentFirst = 0;

  constructor(private readonly db: Sqlite) {
    this.id = feedIdOf(db);
  }

  cursorOf(seq: number): string {
    return `${this.id}-${seq}`;
  }

  /** The seq a cursor names; undefined when it is not a cursor at all (a 400). Another feed's cursor: CursorExpiredError. */
  seqOf(cursor: string): number | undefined {
    const match = CURSOR.exec(cursor);
    if (!match) return undefined;
    if (match[1] !== this.id) {
      throw new CursorExpiredError('this cursor is from another data folder: read again from the start', this.cursorOf(this.oldestHeld()));
    }
    return Number(match[2]);
  }

  /** The seq of the last change committed (0 before any). */
  head(): number {
    return this.db.get<{ seq: number }>("SELECT seq FROM sqlite_sequence WHERE name = 'changes'")?.seq ?? 0;
  }

  /**
   * Up to `limit` changes after `after` that match `filter`, in commit order,
   * and the cursor to go on from. Throws CursorExpiredError when changes after
   * `after` are no longer held (or `after` is ahead of this feed).
   */
  read(
    after: number | undefined,
    filter: FeedFilter,
    limit: number,
    /** The reader waits if it finds nothing (a long poll): memory may answer it (see below). */
    waits = false,
  ): { changes: OperationChange[]; cursor: number /** Read up to the head (as far as it is known) */; complete: boolean } {
    const changes: OperationChange[] = [];
    // Near the head (a stream or a watcher going on): from memory, no query and nothing parsed again. Whatever
    // was committed after the last entry is on its way to the waiters (dispatch), this reader among them: so only
    // for a reader that waits. One that does not (a snapshot's catch-up, a plain read) would miss what was committed
    // while nobody waited, which no dispatch has brought into memory.
    const end = this.recentFirst + this.recent.length - 1;
    if (
      waits &&
      after !== undefined &&
      this.recent.length > 0 &&
      after >= this.recentFirst - 1 &&
      after <= end &&
      end === this.dispatched
    ) {
      let cursor = after;
      for (let seq = after + 1; seq <= end; seq++) {
        cursor = seq;
        const change = this.matching(this.recent[seq - this.recentFirst] as Entry, filter);
        if (!change) continue;
        changes.push(change);
        if (changes.length === limit) return { changes, cursor, complete: cursor === end };
      }
      return { changes, cursor, complete: true };
    }
    return this.db.read(() => {
      const head = this.head();
      if (after === undefined) return { changes, cursor: head, complete: true };
      const oldest = this.oldestHeld(head);
      if (after < oldest || after > head) {
        throw new CursorExpiredError(
          after > head
            ? 'this cursor is ahead of the feed (the data folder was restored from a backup?): read again'
            : 'changes after this cursor are no longer kept (the feed keeps a day): read again, then go on from the oldest cursor',
          this.cursorOf(oldest),
        );
      }
      let cursor = after;
      while (cursor < head && cursor - after < SCAN_LIMIT) {
        const rows = this.rowsAfter(cursor, Math.min(DISPATCH_BATCH, SCAN_LIMIT));
        if (rows.length === 0) break;
        for (const row of rows) {
          cursor = row.seq;
          const change = this.matching(entryOf(row), filter);
          if (!change) continue;
          changes.push(change);
          if (changes.length === limit) return { changes, cursor, complete: cursor >= head };
        }
      }
      return { changes, cursor, complete: cursor >= head };
    });
  }

  /**
   * `read`, and when it finds nothing (and it read up to the head), waits up
   * to `waitMs` for a matching change. Resolves with none after the wait, or
   * when `signal` aborts.
   */
  async next(
    after: number | undefined,
    filter: FeedFilter,
    limit: number,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ changes: OperationChange[]; cursor: number }> {
    const first = this.read(after, filter, limit, waitMs > 0 && !signal?.aborted);
    if (first.changes.length > 0 || waitMs <= 0 || signal?.aborted || !first.complete) return first;
    const waiter = await this.hold({ after: first.cursor, filter, limit, found: [], scanned: first.cursor }, waitMs, signal);
    return { changes: waiter.found, cursor: waiter.scanned };
  }

  /**
   * Resolves once `name` has a version past `afterVersion` (true; default:
   * past the version it has now), or after `waitMs` or on `signal` (false).
   * Listens from the moment it is called, so a caller that reads the record
   * after this call misses no change between the two.
   */
  versionPast(name: string, afterVersion: number | undefined, waitMs: number, signal?: AbortSignal): Promise<boolean> {
    if (waitMs <= 0 || signal?.aborted) return Promise.resolve(false);
    const { head, version } = this.db.read(() => ({
      head: this.head(),
      version: afterVersion ?? this.db.get<{ version: number }>('SELECT version FROM operations WHERE name = ?', name)?.version ?? 0,
    }));
    return this.hold({ after: head, filter: { name }, limit: 1, afterVersion: version, found: [], scanned: head }, waitMs, signal).then(
      (waiter) => waiter.found.length > 0 || waiter.woken === true,
    );
  }

  /**
   * Ends the per-operation waits on `name` (not the feed's own reads): its
   * record changed outside its versions (reconcile stopped polling it), and a
   * waiter must read it again to learn so at once.
   */
  wake(name: string): void {
    for (const waiter of [...(this.named.get(name) ?? [])]) {
      if (waiter.afterVersion === undefined) continue;
      waiter.woken = true;
      waiter.settle();
    }
  }

  /** After each commit that appended changes: one read of them, soon, for every waiter. */
  notify(): void {
    if (this.scheduled || this.waiting === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.dispatch();
    });
  }

  private hold(waiter: Omit<Waiter, 'settle'>, waitMs: number, signal?: AbortSignal): Promise<Waiter> {
    return new Promise((resolve) => {
      // Nobody waited: nothing before this waiter's cursor is owed to anyone.
      if (this.waiting === 0) this.dispatched = waiter.after;
      const held = waiter as Waiter;
      const timer = setTimeout(() => held.settle(), waitMs);
      const abort = () => held.settle();
      held.settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', abort);
        this.release(held);
        // Every row up to `dispatched` was offered to it (one that filled its page stops at its last change).
        if (held.found.length < held.limit) held.scanned = Math.max(held.scanned, this.dispatched);
        resolve(held);
      };
      signal?.addEventListener('abort', abort, { once: true });
      const { map, key } = this.placeOf(held);
      const bucket = map.get(key) ?? new Set();
      map.set(key, bucket.add(held));
      this.waiting++;
      // A commit may have come between the waiter's read and now (none can: both are synchronous), or be pending.
      this.notify();
    });
  }

  /** Where a waiter is kept: by the name it asks for, else by the kind (`*`: every kind). */
  private placeOf(waiter: Waiter): { map: Map<string, Set<Waiter>>; key: string } {
    const { name, kind } = waiter.filter;
    return name ? { map: this.named, key: name } : { map: this.byKind, key: kind ?? '*' };
  }

  private release(waiter: Waiter): void {
    const { map, key } = this.placeOf(waiter);
    const bucket = map.get(key);
    if (!bucket?.delete(waiter)) return;
    if (bucket.size === 0) map.delete(key);
    this.waiting--;
  }

  private dispatch(): void {
    if (this.waiting === 0) return;
    let rows: Row[];
    try {
      rows = this.rowsAfter(this.dispatched, DISPATCH_BATCH);
    } catch {
      // The file is busy for longer than the engine waits: the next commit (or this retry) hands them on.
      setTimeout(() => this.notify(), 50);
      return;
    }
    const last = rows.at(-1);
    if (!last) return;
    const done = new Set<Waiter>();
    const offer = (waiter: Waiter, entry: Entry) => {
      if (entry.seq <= waiter.after || waiter.found.length === waiter.limit) return;
      if (waiter.afterVersion !== undefined && entry.version <= waiter.afterVersion) return;
      // Parsed once, for every waiter it matches, and kept for readers that come back for more (read()).
      const change = this.matching(entry, waiter.filter);
      if (!change) return;
      waiter.found.push(change);
      if (waiter.found.length === waiter.limit) waiter.scanned = entry.seq;
      done.add(waiter);
    };
    // Only the waiters a row can concern: its name's, its kind's, and those on every kind.
    const none = new Set<Waiter>();
    for (const row of rows) {
      const entry = entryOf(row);
      this.remember(entry);
      for (const waiter of this.named.get(entry.name) ?? none) offer(waiter, entry);
      for (const waiter of this.byKind.get(entry.kind) ?? none) offer(waiter, entry);
      for (const waiter of this.byKind.get('*') ?? none) offer(waiter, entry);
    }
    this.dispatched = last.seq;
    for (const waiter of done) waiter.settle();
    if (rows.length === DISPATCH_BATCH) this.notify();
  }

  /** Keeps the last RECENT entries or so, contiguous by seq (a gap starts them again). */
  private remember(entry: Entry): void {
    const next = this.recentFirst + this.recent.length;
    if (this.recent.length > 0 && entry.seq < next) return;
    if (this.recent.length === 0 || entry.seq > next) {
      this.recent = [];
      this.recentFirst = entry.seq;
    }
    this.recent.push(entry);
    if (this.recent.length >= 2 * RECENT) {
      this.recent = this.recent.slice(RECENT);
      this.recentFirst += RECENT;
    }
  }

  private rowsAfter(seq: number, limit: number): Row[] {
    return this.db.all<Row>(
      'SELECT seq, name, version, write_kind, new_record, at FROM changes WHERE seq > ? ORDER BY seq LIMIT ?',
      seq,
      limit,
    );
  }

  /** The entry's change when it matches `filter` (the cheap checks first, the record parsed only past them). */
  private matching(entry: Entry, filter: FeedFilter): OperationChange | undefined {
    if (!prefilter(entry, filter)) return undefined;
    const change = this.parsed(entry);
    return matches(change, filter) ? change : undefined;
  }

  private parsed(entry: Entry): OperationChange {
    entry.change ??= this.changeOf(entry.row);
    return entry.change;
  }

  private changeOf(row: Row): OperationChange {
    return changeOf(JSON.parse(row.new_record) as OperationRecord, this.cursorOf(row.seq), new Date(row.at).toISOString());
  }

  /** The seq just before the oldest change still held: reading after it returns everything kept. */
  private oldestHeld(head = this.head()): number {
    const oldest = this.db.get<{ seq: number | null }>('SELECT min(seq) AS seq FROM changes')?.seq;
    return (oldest ?? head + 1) - 1;
  }
}

/** Cheap checks, before the record is parsed. */
function prefilter(entry: Entry, filter: FeedFilter): boolean {
  return (
    (filter.name === undefined || entry.name === filter.name) &&
    (filter.kind === undefined || entry.kind === filter.kind) &&
    (filter.provider === undefined || providerOf(entry.kind) === filter.provider)
  );
}

/** The check that needs the record. */
function matches(change: OperationChange, filter: FeedFilter): boolean {
  return filter.state === undefined || change.state === filter.state;
}

/** The `notes` key of the feed id; a backup copy leaves it out (local/cli/backup.ts). */
export const FEED_ID_NOTE = 'feed-id';

/** This data file's feed id, made on first use (and on the first start of a restored backup). */
function feedIdOf(db: Sqlite): string {
  const read = () => db.get<{ value: string }>('SELECT value FROM notes WHERE key = ?', FEED_ID_NOTE)?.value;
  const kept = read();
  if (kept) return kept;
  const id = randomBytes(4).toString('hex');
  db.write(() => db.run('INSERT INTO notes (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', FEED_ID_NOTE, id));
  return read() ?? id;
}

export type { FeedFilter, OperationChange };
export { CursorExpiredError };

/** The feed as the application's port (app/feed.ts): cursors as text, the same for every engine. */
export function feedPort(feed: ChangeFeed): ChangeFeedPort {
  const seqOf = (cursor: string | undefined) => {
    if (cursor === undefined) return undefined;
    const seq = feed.seqOf(cursor);
    if (seq === undefined) throw new CursorExpiredError('not a cursor of this feed: read again from the start', feed.cursorOf(0));
    return seq;
  };
  return {
    headCursor: async () => feed.cursorOf(feed.head()),
    isCursor: (text) => CURSOR.test(text),
    check: async (cursor) => void feed.read(seqOf(cursor), {}, 1),
    next: async (after, filter, limit, waitMs, signal) => {
      const page = await feed.next(seqOf(after), filter, limit, waitMs, signal);
      return { changes: page.changes, cursor: feed.cursorOf(page.cursor) };
    },
    versionPast: (name, afterVersion, waitMs, signal) => feed.versionPast(name, afterVersion, waitMs, signal),
  };
}
