/**
 * The operations store on SQLite: every event is read, reduced by the pure
 * reducer and written in one write transaction, so no race can exist and a
 * discard changes no record (it leaves only its decision, see `decisions`).
 * Each applied write appends its change to the outbox (`changes`) in the same
 * transaction: this engine's table stream.
 *
 * The same ports as the DynamoDB store (engines/dynamodb/operation-store.ts),
 * held to the same contract tests.
 */

import type { OperationCounts } from '../../app/engine.ts';
import type {
  ApplyOutcome,
  Decision,
  DecisionLog,
  DeliveryReceipts,
  ListFilter,
  OperationQueries,
  OperationStore,
  OperationView,
  OverdueWatch,
  PollCandidate,
  PollRequests,
  PollSchedule,
  PollState,
  UnmappedDelivery,
  UnprocessableDelivery,
  UnprocessableLog,
  WriteHint,
  WriteOutcome,
} from '../../app/ports.ts';
import { writeKindOf } from '../../core/change.ts';
import {
  isTerminal,
  OPERATION_KINDS,
  OPERATION_STATES,
  type OperationKind,
  type OperationState,
  PROVIDER_KINDS,
} from '../../core/lifecycle.ts';
import type { OverdueLimits } from '../../core/overdue.ts';
import { applyEvent, type DiscardReason, isPolled, type OperationEvent, type OperationRecord, storedRecord } from '../../core/reducer.ts';
import { timeAfter, timeFromDate } from '../../core/time.ts';
import {
  appliedDecisionOf,
  DECISION_RETENTION_DAYS,
  DECISIONS_KEPT,
  decisionOf,
  type OperationRow,
  pageKeyOf,
  pageOf,
  pollOf,
  sqlList,
  viewOf,
} from '../sql/rows.ts';
import type { Sqlite } from './sqlite.ts';

/** Kinds reconcile polls: all of them, as in AWS. */
const POLLABLE: ReadonlySet<OperationKind> = new Set(OPERATION_KINDS);
const UNMAPPED_NOTE = 'unmapped-delivery';
/** Decisions kept per operation (and 30 days, see pruneDecisions). */

/** The terminal states as an SQL list. */
const TERMINAL_LIST = sqlList(OPERATION_STATES.filter(isTerminal));
/** The open states, as the partial indexes of schema 6 spell them (a query must repeat them to use those indexes). */
const OPEN_LIST = sqlList(OPERATION_STATES.filter((state) => !isTerminal(state)));
/** Marked overdue and still open: `operations_overdue`'s own condition. */
const MARKED_OPEN = `overdue_at IS NOT NULL AND state IN (${OPEN_LIST})`;

export class SqliteOperationStore
  implements OperationStore, OperationQueries, PollSchedule, PollRequests, DeliveryReceipts, DecisionLog, UnprocessableLog, OverdueWatch
{
  constructor(
    private readonly db: Sqlite,
    /** Called after each commit that appended to the outbox (the outbox feed wakes). */
    private readonly onChange: () => void = () => {},
    /** Called when reconcile stopped polling an open operation (not found, refused): waiters on it read it again. */
    private readonly onPollingStopped: (name: string) => void = () => {},
  ) {}

  private row(name: string): OperationRow | undefined {
    return this.db.get<OperationRow>('SELECT * FROM operations WHERE name = ?', name);
  }

  async get(name: string): Promise<OperationRecord | undefined> {
    const row = this.row(name);
    return row && storedRecord(JSON.parse(row.record) as OperationRecord);
  }

  async write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome> {
    const outcome = await this.db.writeGrouped((): WriteOutcome => {
      const row = this.row(next.name);
      const current = row && storedRecord(JSON.parse(row.record) as OperationRecord);
      if (current?.version !== expectedVersion) return { ok: false, current };
      this.store(current, next);
      this.decide(next.name, appliedDecisionOf(next));
      return { ok: true };
    });
    if (outcome.ok) this.onChange();
    return outcome;
  }

  /**
   * One transaction: read, reduce, write (the hint of a record at hand is not needed: the read is local).
   * An event the stored record already refuses is only noted (see noteDiscard): the reducer is monotone, so a
   * refusal stays a refusal whatever is written meanwhile, and a note needs no fsync.
   */
  async apply(event: OperationEvent, now: string, hint?: WriteHint): Promise<ApplyOutcome> {
    const held = this.row(event.name);
    const heldRecord = held && storedRecord(JSON.parse(held.record) as OperationRecord);
    const first = applyEvent(heldRecord, event, now);
    if (!first.applied) {
      await this.noteDiscard(event, first.reason, now);
      return { ok: false, current: heldRecord };
    }
    const outcome = await this.db.writeGrouped((): ApplyOutcome => {
      const row = this.row(event.name);
      // Reduced again only if another write came in between (the reducer is pure: the same record gives the same decision).
      const unchanged = row?.record === held?.record;
      const current = unchanged ? heldRecord : row && storedRecord(JSON.parse(row.record) as OperationRecord);
      const decision = unchanged ? first : applyEvent(current, event, now);
      if (!decision.applied) {
        this.decide(event.name, decisionOf(event, now, { verdict: 'discarded', reason: decision.reason }));
        return { ok: false, current };
      }
      this.store(current, decision.next, hint?.traceparent);
      this.decide(event.name, decisionOf(event, now, { verdict: 'applied', version: decision.next.version }));
      return { ok: true, record: decision.next };
    });
    if (outcome.ok) this.onChange();
    return outcome;
  }

  /** The row and its outbox entry; inside the caller's transaction. */
  private store(current: OperationRecord | undefined, next: OperationRecord, trace?: string): void {
    const open = isPolled(next) && POLLABLE.has(next.kind);
    const record = JSON.stringify(next);
    this.db.run(
      `INSERT INTO operations (name, kind, state, version, recorded_at, record, poll_bucket, next_poll_at, created_at, overdue_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, state = excluded.state, version = excluded.version,
         recorded_at = excluded.recorded_at, record = excluded.record, created_at = excluded.created_at, overdue_at = excluded.overdue_at,
         next_poll_at = CASE WHEN excluded.next_poll_at IS NULL THEN NULL
           -- The write that marks it overdue leaves its schedule as it was (a job whose polling stopped stays stopped).
           WHEN operations.overdue_at IS NULL AND excluded.overdue_at IS NOT NULL THEN operations.next_poll_at
           ELSE coalesce(operations.next_poll_at, excluded.next_poll_at) END`,
      next.name,
      next.kind,
      next.state,
      next.version,
      next.recordedAt,
      record,
      // Unused since schema 4 (the due index is on next_poll_at alone); kept for the column's NOT NULL.
      'open',
      open ? next.recordedAt : null,
      next.createdAt,
      next.overdue?.at ?? null,
    );
    const writeKind = writeKindOf(next);
    this.db.run(
      'INSERT INTO changes (name, version, write_kind, old_record, new_record, at, trace) VALUES (?, ?, ?, ?, ?, ?, ?)',
      next.name,
      next.version,
      writeKind,
      current ? JSON.stringify(current) : null,
      record,
      Date.now(),
      trace ?? null,
    );
  }

  /**
   * A discard decided on the record at hand (ingest's or reconcile's, maybe
   * older than the stored one): one short write of its own, with the reason
   * the stored record gives (a poll of RUNNING refused by a held RUNNING is,
   * once SUCCEEDED is stored, "after the job ended").
   */
  async noteDiscard(event: OperationEvent, heldReason: DiscardReason, now: string): Promise<undefined> {
    // A note, not an accepted change: committed without an fsync of its own (it rides a durable group's when there is one).
    await this.db.writeGrouped(() => {
      const row = this.row(event.name);
      const stored = row && applyEvent(storedRecord(JSON.parse(row.record) as OperationRecord), event, now);
      const reason = stored && !stored.applied ? stored.reason : heldReason;
      this.decide(event.name, decisionOf(event, now, { verdict: 'discarded', reason }));
    }, 'derived');
  }

  async note(name: string, decision: Decision): Promise<void> {
    await this.db.writeGrouped(() => this.decide(name, decision), 'derived');
  }

  /** One decision, in the caller's transaction; the operation keeps its last DECISIONS_KEPT. */
  private decide(name: string, decision: Decision): void {
    this.db.run('INSERT INTO decisions (name, decision, at) VALUES (?, ?, ?)', name, JSON.stringify(decision), Date.now());
    this.db.run(
      'DELETE FROM decisions WHERE name = ? AND id <= (SELECT id FROM decisions WHERE name = ? ORDER BY id DESC LIMIT 1 OFFSET ?)',
      name,
      name,
      DECISIONS_KEPT,
    );
  }

  async decisions(name: string): Promise<Decision[]> {
    return this.db
      .all<{ decision: string }>(
        'SELECT decision FROM decisions WHERE name = ? AND at > ? ORDER BY id',
        name,
        Date.now() - DECISION_RETENTION_DAYS * 86_400_000,
      )
      .map((row) => JSON.parse(row.decision) as Decision);
  }

  /**
   * Deletes operations tracked more than `olderThanMs` ago and never
   * observed (no state: reconcile stopped polling them at half that age),
   * with their history and decisions. Returns how many.
   */
  deleteUnseen(olderThanMs: number, now = Date.now()): number {
    const cutoff = timeFromDate(new Date(now - olderThanMs));
    return this.db.write(() => {
      const names = this.db
        .all<{ name: string }>("SELECT name FROM operations WHERE state IS NULL AND json_extract(record, '$.createdAt') < ?", cutoff)
        .map((row) => row.name);
      for (const name of names) {
        this.db.run('DELETE FROM operations WHERE name = ?', name);
        this.db.run('DELETE FROM history WHERE name = ?', name);
        this.db.run('DELETE FROM decisions WHERE name = ?', name);
      }
      return names.length;
    });
  }

  /** Removes decisions past their 30 days. */
  pruneDecisions(now = Date.now()): void {
    const before = now - DECISION_RETENTION_DAYS * 86_400_000;
    this.db.writeDerived(() => {
      this.db.run('DELETE FROM decisions WHERE at <= ?', before);
      this.db.run('DELETE FROM unprocessable WHERE at <= ?', before);
    });
  }

  async recordUnprocessable(delivery: UnprocessableDelivery): Promise<void> {
    await this.db.writeGrouped(() =>
      this.db.run(
        `INSERT INTO unprocessable (webhook_id, received_at, entry, at) VALUES (?, ?, ?, ?)
         ON CONFLICT (webhook_id) DO UPDATE SET received_at = excluded.received_at, entry = excluded.entry, at = excluded.at`,
        delivery.webhookId,
        delivery.receivedAt,
        JSON.stringify(delivery),
        Date.parse(delivery.receivedAt),
      ),
    );
  }

  /** Newest first; the cursor is the last row's key, as the list's. */
  async listUnprocessable(page: { limit: number; cursor?: string }): Promise<{ decisions: UnprocessableDelivery[]; nextCursor?: string }> {
    const after = page.cursor === undefined ? undefined : pageKeyOf(page.cursor, 'unprocessable');
    const rows = this.db.all<{ received_at: string; webhook_id: string; entry: string }>(
      `SELECT received_at, webhook_id, entry FROM unprocessable ${after ? 'WHERE (received_at, webhook_id) < (?, ?)' : ''}
       ORDER BY received_at DESC, webhook_id DESC LIMIT ?`,
      ...(after ?? []),
      page.limit + 1,
    );
    const { taken, nextCursor } = pageOf(rows, page.limit, (row) => [row.received_at, row.webhook_id], 'unprocessable');
    return { decisions: taken.map((row) => JSON.parse(row.entry) as UnprocessableDelivery), ...(nextCursor && { nextCursor }) };
  }

  async describe(name: string): Promise<OperationView | undefined> {
    const row = this.row(name);
    return row && viewOf(row);
  }

  /** Newest first, from the recent index (by state or kind when filtered); the cursor is the last row's key. */
  async list(filter: ListFilter): Promise<{ operations: OperationView[]; nextCursor?: string }> {
    const after = filter.cursor === undefined ? undefined : pageKeyOf(filter.cursor);
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.state) {
      where.push('state = ?');
      params.push(filter.state);
    }
    if (filter.kind) {
      where.push('kind = ?');
      params.push(filter.kind);
    }
    if (filter.provider) {
      where.push('kind IN (SELECT value FROM json_each(?))');
      params.push(JSON.stringify(PROVIDER_KINDS[filter.provider]));
    }
    // The effects the derived work keeps in the same file: a failed attempt's count is written when it fails.
    if (filter.effects === 'retrying') where.push('name IN (SELECT name FROM effect_messages WHERE receive_count > 0)');
    if (filter.effects === 'dead-lettered')
      where.push("name IN (SELECT operation FROM dead_letters WHERE status = 'dead' AND operation NOT LIKE '#%')");
    if (filter.overdue) where.push(MARKED_OPEN);
    if (after) {
      where.push('(recorded_at, name) < (?, ?)');
      params.push(after[0], after[1]);
    }
    const rows = this.db.all<OperationRow>(
      `SELECT * FROM operations ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY recorded_at DESC, name DESC LIMIT ?`,
      ...params,
      filter.limit + 1,
    );
    const { taken, nextCursor } = pageOf(rows, filter.limit, (row) => [row.recorded_at, row.name]);
    return { operations: taken.map(viewOf), ...(nextCursor && { nextCursor }) };
  }

  /** The console's counts: operations per state (`null`: tracked, nothing observed yet) and kind, and how many of them are open and overdue. */
  counts(): OperationCounts[] {
    // From indexes alone, no record read: every row and the oldest open ones from (state, kind, created_at), the
    // overdue ones from the partial index of the marked open jobs.
    return this.db.all(
      `SELECT c.state, c.kind, c.count, coalesce(m.overdue, 0) AS overdue, o.oldestOpenSince
       FROM (SELECT state, kind, COUNT(*) AS count FROM operations GROUP BY state, kind) c
       LEFT JOIN (
         SELECT state, kind, MIN(created_at) AS oldestOpenSince
         FROM operations WHERE state IN (${OPEN_LIST}) OR state IS NULL GROUP BY state, kind) o
       ON o.state IS c.state AND o.kind = c.kind
       LEFT JOIN (SELECT state, kind, COUNT(*) AS overdue FROM operations WHERE ${MARKED_OPEN} GROUP BY state, kind) m
       ON m.state IS c.state AND m.kind = c.kind`,
    );
  }

  /**
   * The console's list: open operations first, then the newest; `state: null`
   * selects the tracked ones. Paged by offset (a page for people, not a feed).
   */
  consoleList(filter: {
    state?: OperationState | null;
    open?: boolean;
    kind?: OperationKind;
    names?: string[];
    overdue?: boolean;
    limit: number;
    offset: number;
  }): OperationView[] {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.open) where.push(`coalesce(state NOT IN (${TERMINAL_LIST}), 1)`);
    if (filter.state === null) where.push('state IS NULL');
    else if (filter.state) {
      where.push('state = ?');
      params.push(filter.state);
    }
    if (filter.kind) {
      where.push('kind = ?');
      params.push(filter.kind);
    }
    if (filter.names) {
      where.push(`name IN (SELECT value FROM json_each(?))`);
      params.push(JSON.stringify(filter.names));
    }
    if (filter.overdue) where.push(MARKED_OPEN);
    return this.db
      .all<OperationRow>(
        `SELECT * FROM operations ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
         ORDER BY coalesce(state IN (${TERMINAL_LIST}), 0), recorded_at DESC, name DESC LIMIT ? OFFSET ?`,
        ...params,
        filter.limit,
        filter.offset,
      )
      .map(viewOf);
  }

  /**
   * The open jobs not yet marked whose kind's limit has passed at `now` (this process's clock: it alone holds the
   * file), oldest first per kind, from `operations_open_by_age`: whether or not they are still polled.
   */
  async findOverdue(limits: OverdueLimits, now: string, limit: number): Promise<{ at: string; records: OperationRecord[] }> {
    const records: OperationRecord[] = [];
    for (const kind of OPERATION_KINDS) {
      const seconds = limits[kind];
      if (seconds === null || records.length >= limit) continue;
      const rows = this.db.all<{ record: string }>(
        `SELECT record FROM operations WHERE overdue_at IS NULL AND state IN (${OPEN_LIST}) AND kind = ? AND created_at <= ?
         ORDER BY created_at LIMIT ?`,
        kind,
        timeAfter(now, -seconds * 1000),
        limit - records.length,
      );
      records.push(...rows.map((row) => storedRecord(JSON.parse(row.record) as OperationRecord)));
    }
    return { at: now, records };
  }

  /** What is due, earliest first: one process holds the file, so the claim is that alone. */
  async claimDue(now: string, limit: number, leaseMs?: number): Promise<PollCandidate[]> {
    const due = () =>
      this.db.all<OperationRow>(
        'SELECT * FROM operations WHERE next_poll_at IS NOT NULL AND next_poll_at <= ? ORDER BY next_poll_at LIMIT ?',
        now,
        limit,
      );
    // Claimed by moving each one's next poll to the lease's end, in the read's own transaction: until its
    // schedulePoll (or a write that reschedules it), or the lease's end, no other claim is handed it.
    const rows =
      leaseMs === undefined
        ? due()
        : this.db.write(() => {
            const claimed = due();
            const until = timeAfter(now, leaseMs);
            for (const row of claimed) this.db.run('UPDATE operations SET next_poll_at = ? WHERE name = ?', until, row.name);
            return claimed;
          });
    return rows.map((row) => ({ record: storedRecord(JSON.parse(row.record) as OperationRecord), poll: pollOf(row) }));
  }

  async pollNow(name: string, now: string): Promise<boolean> {
    return this.db.write(() => {
      const row = this.row(name);
      if (!row || !isPolled(JSON.parse(row.record) as OperationRecord)) return false;
      this.db.run(
        'UPDATE operations SET next_poll_at = ?, unchanged_polls = 0, failed_polls = 0, not_found_polls = 0, poll_note = NULL WHERE name = ?',
        now,
        name,
      );
      return true;
    });
  }

  async schedulePoll(
    name: string,
    version: number,
    poll: Omit<PollState, 'nextPollAt'> & { nextPollAt: string | null; note?: string },
  ): Promise<boolean> {
    // Only while still open at this version: a concurrent webhook or terminal state wins.
    const { changes } = this.db.write(() =>
      this.db.run(
        `UPDATE operations SET next_poll_at = ?, unchanged_polls = ?, failed_polls = ?, not_found_polls = ?, poll_note = ?
         WHERE name = ? AND version = ? AND next_poll_at IS NOT NULL`,
        poll.nextPollAt,
        poll.unchangedPolls,
        poll.failedPolls,
        poll.notFoundPolls,
        poll.note ?? null,
        name,
        version,
      ),
    );
    if (changes > 0 && poll.nextPollAt === null) this.onPollingStopped(name);
    return changes > 0;
  }

  async recordUnmapped(delivery: UnmappedDelivery): Promise<void> {
    this.db.write(() => {
      const received = ((JSON.parse(this.noteValue(UNMAPPED_NOTE) ?? '{}') as { received?: number }).received ?? 0) + 1;
      this.db.run(
        'INSERT INTO notes (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
        UNMAPPED_NOTE,
        JSON.stringify({ ...delivery, received }),
      );
    });
  }

  async lastUnmapped(): Promise<(UnmappedDelivery & { received: number }) | undefined> {
    const value = this.noteValue(UNMAPPED_NOTE);
    return value === undefined ? undefined : JSON.parse(value);
  }

  private noteValue(key: string): string | undefined {
    return this.db.get<{ value: string }>('SELECT value FROM notes WHERE key = ?', key)?.value;
  }
}
