/**
 * The operations store on PostgreSQL, for any number of instances on one
 * database. Each write is one statement (one-write.ts; under load several
 * operations' writes share one): a compare-and-set on
 * the version the reducer read, with its change-log row, history entry,
 * effect and decisions; on a lost race the same statement hands back the
 * winner and the events are reduced again (past MAX_ATTEMPTS it is
 * WriteContentionError: the webhook answers 503 and Gemini sends it again).
 *
 * Events for one operation go through its lane (a coalescer,
 * engines/sql/coalescer.ts): while one statement for it is on its way, the
 * events that arrive meanwhile wait, and are then reduced one after another
 * and written together in the next statement. A hot operation costs one
 * round trip per batch, not per event, and loses no race to itself.
 * The record a lane reduces against comes from the caller (ingest's write
 * hints, reconcile's poll) or the lane's last statement: no read first. A
 * poll's next time is written in the same statement as its outcome.
 *
 * The same ports as the SQLite and DynamoDB stores, held to the same
 * conformance suite.
 */

import type { OperationCounts } from '../../app/engine.ts';
import {
  type ApplyOutcome,
  type Decision,
  type DecisionLog,
  type DeliveryReceipts,
  type ListFilter,
  type OperationQueries,
  type OperationStore,
  type OperationView,
  type OverdueWatch,
  type PollCandidate,
  type PollNext,
  type PollRequests,
  type PollSchedule,
  type PollState,
  type UnmappedDelivery,
  type UnprocessableDelivery,
  type UnprocessableLog,
  WriteContentionError,
  type WriteHint,
  type WriteOutcome,
} from '../../app/ports.ts';
import {
  isTerminal,
  OPERATION_KINDS,
  OPERATION_STATES,
  type OperationKind,
  type OperationState,
  PROVIDER_KINDS,
} from '../../core/lifecycle.ts';
import type { OverdueLimits } from '../../core/overdue.ts';
import { applyEvent, type DiscardReason, type OperationEvent, type OperationRecord, storedRecord } from '../../core/reducer.ts';
import { timeAfter, timeFromDate } from '../../core/time.ts';
import { Coalescer } from '../sql/coalescer.ts';
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
import type { Postgres } from './database.ts';
import { Writes } from './one-write.ts';

/**
 * Statements one batch of writes tries against racing instances before
 * WriteContentionError (a 503: the sender retries). Each lost race hands
 * back the winner, so a retry loses only to a write committed within its
 * round trip: with 8, three instances writing one hot operation answered a
 * few 503s in the bench; a short random pause after the second loss puts
 * racing instances out of step.
 */
export const MAX_ATTEMPTS = 32;
/** Events of one operation written together at most. */
const MAX_BATCH = 64;
const UNMAPPED_NOTE = 'unmapped-delivery';
/** The open states, as schema 4's partial indexes spell them: a query repeats them (not a parameter) to use those indexes. */
const OPEN_LIST = sqlList(OPERATION_STATES.filter((state) => !isTerminal(state)));
/** Marked overdue and still open: `operations_overdue`'s own condition. */
const MARKED_OPEN = `overdue_at IS NOT NULL AND state IN (${OPEN_LIST})`;
/** A timestamptz expression as the core's normalised text (`timeFromDate`'s form, 9 digits): comparable with the times stored. */
const asStoredTime = (instant: string) => `to_char((${instant}) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"000Z"')`;

export interface PostgresStoreOptions {
  historyRetentionDays: number;
  /** Whether each state change also queues its effect (the outbound webhook is on). */
  effects: boolean;
  /** After each commit that applied a write, in this instance (its feed's waiters wake at once; others' by NOTIFY or poll). */
  onChange?: (name: string) => void;
  /** Reconcile stopped polling an open operation: waiters on it read it again. */
  onPollingStopped?: (name: string) => void;
}

/** An event waiting in its operation's lane: to apply, or (`discard`) only to note as discarded. */
interface Waiting {
  event: OperationEvent;
  now: string;
  /** noteDiscard's: the reason it was discarded with against the caller's record. */
  discard?: DiscardReason;
  /** A poll's: its next time, written in the same statement. */
  pollNext?: PollNext;
  /** The write's span (OpenTelemetry on), kept with the effect of the version it makes. */
  traceparent?: string;
}

interface Lane {
  /** The record the next batch is reduced against (undefined: none stored, as far as this lane knows). */
  base: OperationRecord | undefined;
  /** Its events: one batch in flight, those that arrive meanwhile (up to MAX_BATCH) in the next. */
  events: Coalescer<Waiting, ApplyOutcome>;
}

const newer = (a: OperationRecord | undefined, b: OperationRecord | undefined) => (b && (!a || b.version > a.version) ? b : a);

export class PostgresOperationStore
  implements OperationStore, OperationQueries, PollSchedule, PollRequests, DeliveryReceipts, DecisionLog, UnprocessableLog, OverdueWatch
{
  private readonly lanes = new Map<string, Lane>();
  private readonly writes: Writes;

  constructor(
    private readonly db: Postgres,
    private readonly options: PostgresStoreOptions,
  ) {
    this.writes = new Writes(db, options);
  }

  private async row(name: string): Promise<OperationRow | undefined> {
    const [row] = await this.db.rows<OperationRow>('SELECT * FROM {s}.operations WHERE name = $1', [name]);
    return row;
  }

  async get(name: string): Promise<OperationRecord | undefined> {
    const row = await this.row(name);
    return row && storedRecord(JSON.parse(row.record) as OperationRecord);
  }

  /** `next` whole, only at `expectedVersion`: one statement, and the stored record back when it was not. */
  async write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome> {
    const outcome = await this.writes.write({
      name: next.name,
      expected: expectedVersion,
      versions: [next],
      decisions: [appliedDecisionOf(next)],
    });
    if (outcome.ok) this.options.onChange?.(next.name);
    return outcome;
  }

  /** Through the operation's lane: reduced against the record at hand, written in one statement with the events beside it. */
  apply(event: OperationEvent, now: string, hint?: WriteHint): Promise<ApplyOutcome> {
    return this.enqueue(event.name, hint?.current, { event, now, pollNext: hint?.pollNext, traceparent: hint?.traceparent });
  }

  /** A discard ingest decided against the record at hand: its decision, with the reason the stored record gives (one statement while that record is current). */
  async noteDiscard(event: OperationEvent, reason: DiscardReason, now: string, hint?: WriteHint): Promise<{ scheduled?: boolean }> {
    const { scheduled } = await this.enqueue(event.name, hint?.current, { event, now, discard: reason, pollNext: hint?.pollNext });
    return { scheduled };
  }

  private enqueue(name: string, known: OperationRecord | undefined, waiting: Waiting): Promise<ApplyOutcome> {
    const lane = this.lanes.get(name) ?? this.openLane(name);
    lane.base = newer(lane.base, known);
    return lane.events.push(waiting);
  }

  /** A lane for `name`, kept until none of its events waits or is on its way. */
  private openLane(name: string): Lane {
    const lane: Lane = {
      base: undefined,
      events: new Coalescer(
        async (batch) => {
          try {
            return await this.writeBatch(name, lane, batch);
          } catch (error) {
            lane.base = undefined;
            throw error;
          }
        },
        // A turn of the event loop first: events sent at once go in one batch.
        { maxBatch: MAX_BATCH, gatherTurn: true, onIdle: () => this.lanes.delete(name) },
      ),
    };
    this.lanes.set(name, lane);
    return lane;
  }

  /** The batch reduced in order against the lane's record, written in one statement; again against the winner on a lost race. */
  private async writeBatch(name: string, lane: Lane, batch: Waiting[]): Promise<ApplyOutcome[]> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const base = lane.base;
      let record = base;
      const versions: OperationRecord[] = [];
      const traces: Array<string | undefined> = [];
      const decisions: Decision[] = [];
      const outcomes: ApplyOutcome[] = [];
      let poll: ReturnType<PollNext> | undefined;
      for (const { event, now, discard, pollNext, traceparent } of batch) {
        const decision = applyEvent(record, event, now);
        if (discard !== undefined || !decision.applied) {
          const reason = decision.applied ? (discard as DiscardReason) : decision.reason;
          decisions.push(decisionOf(event, now, { verdict: 'discarded', reason }));
          outcomes.push({ ok: false, current: record });
          poll = pollNext?.({ stateChanged: false }) ?? poll;
          continue;
        }
        record = decision.next;
        versions.push(record);
        traces.push(traceparent);
        decisions.push(decisionOf(event, now, { verdict: 'applied', version: record.version }));
        outcomes.push({ ok: true, record });
        poll = pollNext?.({ stateChanged: record.stateChanged }) ?? poll;
      }
      const outcome = await this.writes.write({ name, expected: base?.version, versions, decisions, poll, traces });
      if (outcome.ok) {
        lane.base = record;
        if (versions.length > 0) this.options.onChange?.(name);
        // A poll's next time went with it (nothing to schedule for one that ended the job).
        return poll ? outcomes.map((each, i) => (batch[i]?.pollNext ? { ...each, scheduled: true } : each)) : outcomes;
      }
      lane.base = outcome.current;
      // Lost again and again: a pause of up to a millisecond per loss, so racing instances fall out of step.
      if (attempt >= 2) await new Promise((resolve) => setTimeout(resolve, Math.random() * attempt));
    }
    throw new WriteContentionError(`${name}: ${MAX_ATTEMPTS} attempts lost to concurrent writes`);
  }

  async decisions(name: string): Promise<Decision[]> {
    const rows = await this.db.rows<{ decision: string }>(
      `SELECT decision FROM (SELECT id, decision FROM {s}.decisions WHERE name = $1 AND at > $2 ORDER BY id DESC LIMIT $3) AS d ORDER BY id`,
      [name, Date.now() - DECISION_RETENTION_DAYS * 86_400_000, DECISIONS_KEPT],
    );
    return rows.map((row) => JSON.parse(row.decision) as Decision);
  }

  /** Operations tracked more than `olderThanMs` ago and never observed, with their history and decisions: how many. */
  async deleteUnseen(olderThanMs: number, now = Date.now()): Promise<number> {
    const cutoff = timeFromDate(new Date(now - olderThanMs));
    return this.db.transaction(async (tx) => {
      const names = (
        await this.db.rows<{ name: string }>(
          'DELETE FROM {s}.operations WHERE state IS NULL AND created_at < $1 RETURNING name',
          [cutoff],
          tx,
        )
      ).map((row) => row.name);
      if (names.length > 0) {
        await this.db.run('DELETE FROM {s}.history WHERE name = ANY($1)', [names], tx);
        await this.db.run('DELETE FROM {s}.decisions WHERE name = ANY($1)', [names], tx);
      }
      return names.length;
    });
  }

  /** Removes decisions and unprocessable deliveries past their 30 days. */
  async pruneDecisions(now = Date.now()): Promise<void> {
    const before = now - DECISION_RETENTION_DAYS * 86_400_000;
    await this.db.run('DELETE FROM {s}.decisions WHERE at <= $1', [before]);
    await this.db.run('DELETE FROM {s}.unprocessable WHERE at <= $1', [before]);
  }

  async recordUnprocessable(delivery: UnprocessableDelivery): Promise<void> {
    await this.db.run(
      `INSERT INTO {s}.unprocessable (webhook_id, received_at, entry, at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (webhook_id) DO UPDATE SET received_at = excluded.received_at, entry = excluded.entry, at = excluded.at`,
      [delivery.webhookId, delivery.receivedAt, JSON.stringify(delivery), Date.parse(delivery.receivedAt)],
    );
  }

  async listUnprocessable(page: { limit: number; cursor?: string }): Promise<{ decisions: UnprocessableDelivery[]; nextCursor?: string }> {
    const after = page.cursor === undefined ? undefined : pageKeyOf(page.cursor, 'unprocessable');
    const rows = await this.db.rows<{ received_at: string; webhook_id: string; entry: string }>(
      `SELECT received_at, webhook_id, entry FROM {s}.unprocessable ${after ? 'WHERE (received_at, webhook_id) < ($2, $3)' : ''}
       ORDER BY received_at DESC, webhook_id DESC LIMIT $1`,
      [page.limit + 1, ...(after ?? [])],
    );
    const { taken, nextCursor } = pageOf(rows, page.limit, (row) => [row.received_at, row.webhook_id], 'unprocessable');
    return { decisions: taken.map((row) => JSON.parse(row.entry) as UnprocessableDelivery), ...(nextCursor && { nextCursor }) };
  }

  async describe(name: string): Promise<OperationView | undefined> {
    const row = await this.row(name);
    return row && viewOf(row);
  }

  async list(filter: ListFilter): Promise<{ operations: OperationView[]; nextCursor?: string }> {
    const after = filter.cursor === undefined ? undefined : pageKeyOf(filter.cursor);
    const where: string[] = [];
    const params: unknown[] = [filter.limit + 1];
    const param = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    if (filter.state) where.push(`state = ${param(filter.state)}`);
    if (filter.kind) where.push(`kind = ${param(filter.kind)}`);
    if (filter.provider) where.push(`kind = ANY(${param(PROVIDER_KINDS[filter.provider])})`);
    if (filter.effects === 'retrying') where.push('name IN (SELECT name FROM {s}.effects WHERE last_error IS NOT NULL)');
    if (filter.effects === 'dead-lettered')
      where.push("name IN (SELECT operation FROM {s}.dead_letters WHERE status = 'dead' AND operation NOT LIKE '#%')");
    if (filter.overdue) where.push(MARKED_OPEN);
    if (after) where.push(`(recorded_at, name) < (${param(after[0])}, ${param(after[1])})`);
    const rows = await this.db.rows<OperationRow>(
      `SELECT * FROM {s}.operations ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY recorded_at DESC, name DESC LIMIT $1`,
      params,
    );
    const { taken, nextCursor } = pageOf(rows, filter.limit, (row) => [row.recorded_at, row.name]);
    return { operations: taken.map(viewOf), ...(nextCursor && { nextCursor }) };
  }

  /** The console's counts: operations per state (`null`: tracked, nothing observed yet) and kind, and how many of them are open and overdue. */
  async counts(): Promise<OperationCounts[]> {
    const rows = await this.db.rows<{
      state: OperationState | null;
      kind: OperationKind;
      count: string;
      overdue: string;
      oldest_open_since: string | null;
    }>(
      // From indexes alone, no record read: every row and the oldest open ones from (state, kind, created_at), the
      // overdue ones from the partial index of the marked open jobs.
      `SELECT c.state, c.kind, c.count, coalesce(m.overdue, 0) AS overdue, o.oldest_open_since
       FROM (SELECT state, kind, count(*) AS count FROM {s}.operations GROUP BY state, kind) c
       LEFT JOIN (
         SELECT state, kind, min(created_at) AS oldest_open_since
         FROM {s}.operations WHERE state IS NULL OR state IN (${OPEN_LIST}) GROUP BY state, kind) o
       ON o.state IS NOT DISTINCT FROM c.state AND o.kind = c.kind
       LEFT JOIN (SELECT state, kind, count(*) AS overdue FROM {s}.operations WHERE ${MARKED_OPEN} GROUP BY state, kind) m
       ON m.state IS NOT DISTINCT FROM c.state AND m.kind = c.kind`,
    );
    return rows.map(({ oldest_open_since, ...row }) => ({
      ...row,
      count: Number(row.count),
      overdue: Number(row.overdue),
      oldestOpenSince: oldest_open_since,
    }));
  }

  /** The console's list: open operations first, then the newest; `state: null` selects the tracked ones. */
  async consoleList(filter: {
    state?: OperationState | null;
    open?: boolean;
    kind?: OperationKind;
    names?: string[];
    overdue?: boolean;
    limit: number;
    offset: number;
  }): Promise<OperationView[]> {
    const terminal = OPERATION_STATES.filter(isTerminal);
    const params: unknown[] = [filter.limit, filter.offset, terminal];
    const param = (value: unknown) => {
      params.push(value);
      return `$${params.length}`;
    };
    const where: string[] = [];
    if (filter.open) where.push('(state IS NULL OR NOT (state = ANY($3)))');
    if (filter.state === null) where.push('state IS NULL');
    else if (filter.state) where.push(`state = ${param(filter.state)}`);
    if (filter.kind) where.push(`kind = ${param(filter.kind)}`);
    if (filter.names) where.push(`name = ANY(${param(filter.names)})`);
    if (filter.overdue) where.push(MARKED_OPEN);
    const rows = await this.db.rows<OperationRow>(
      `SELECT * FROM {s}.operations ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY coalesce(state = ANY($3), false), recorded_at DESC, name DESC LIMIT $1 OFFSET $2`,
      params,
    );
    return rows.map(viewOf);
  }

  /**
   * The open jobs not yet marked whose kind's limit has passed by the database's clock (`now()`, one clock for every
   * instance; the caller's `now` is not used), oldest first per kind, from `operations_open_by_age`, whether or not
   * they are still polled: one statement, a short index range per kind.
   */
  async findOverdue(limits: OverdueLimits, _now: string, limit: number): Promise<{ at: string; records: OperationRecord[] }> {
    const kinds = OPERATION_KINDS.filter((kind) => limits[kind] !== null);
    const rows = await this.db.rows<{ record: string | null; at: string }>(
      `WITH clock AS (SELECT now() AS now)
       SELECT ${asStoredTime('clock.now')} AS at, o.record FROM clock
       LEFT JOIN LATERAL (
         SELECT f.record, f.created_at FROM unnest($1::text[], $2::float8[]) AS l(kind, seconds)
         CROSS JOIN LATERAL (
           SELECT record, created_at FROM {s}.operations
           WHERE overdue_at IS NULL AND state IN (${OPEN_LIST}) AND kind = l.kind
             AND created_at <= ${asStoredTime('clock.now - make_interval(secs => l.seconds)')}
           ORDER BY created_at LIMIT $3) f
         ORDER BY f.created_at LIMIT $3) o ON true`,
      [kinds, kinds.map((kind) => limits[kind]), limit],
    );
    const at = rows[0]?.at as string;
    return { at, records: rows.flatMap((row) => (row.record === null ? [] : [storedRecord(JSON.parse(row.record) as OperationRecord)])) };
  }

  /**
   * What is due, earliest first, each claimed for `leaseMs` by moving its next
   * poll to the lease's end: rows another instance is claiming or writing are
   * skipped (`FOR UPDATE SKIP LOCKED`), so no two pollers are handed one job.
   */
  async claimDue(now: string, limit: number, leaseMs?: number): Promise<PollCandidate[]> {
    const rows =
      leaseMs === undefined
        ? await this.db.rows<OperationRow & { was: string }>(
            `SELECT *, next_poll_at AS was FROM {s}.operations WHERE next_poll_at IS NOT NULL AND next_poll_at <= $1
             ORDER BY next_poll_at LIMIT $2`,
            [now, limit],
          )
        : await this.db.rows<OperationRow & { was: string }>(
            `WITH due AS (
               SELECT name, next_poll_at AS was FROM {s}.operations
               WHERE next_poll_at IS NOT NULL AND next_poll_at <= $1
               ORDER BY next_poll_at LIMIT $2 FOR UPDATE SKIP LOCKED)
             UPDATE {s}.operations o SET next_poll_at = $3 FROM due WHERE o.name = due.name RETURNING o.*, due.was`,
            [now, limit, timeAfter(now, leaseMs)],
          );
    return rows
      .sort((a, b) => (a.was < b.was ? -1 : a.was > b.was ? 1 : 0))
      .map((row) => ({ record: storedRecord(JSON.parse(row.record) as OperationRecord), poll: { ...pollOf(row), nextPollAt: row.was } }));
  }

  async pollNow(name: string, now: string): Promise<boolean> {
    const terminal = OPERATION_STATES.filter(isTerminal);
    const changed = await this.db.run(
      `UPDATE {s}.operations SET next_poll_at = $2, unchanged_polls = 0, failed_polls = 0, not_found_polls = 0, poll_note = NULL
       WHERE name = $1 AND (state IS NULL OR NOT (state = ANY($3)) OR record::jsonb ? 'resultPending')`,
      [name, now, terminal],
    );
    return changed > 0;
  }

  async schedulePoll(
    name: string,
    version: number,
    poll: Omit<PollState, 'nextPollAt'> & { nextPollAt: string | null; note?: string },
  ): Promise<boolean> {
    // Only while still open at this version: a concurrent webhook or terminal state wins.
    const changed = await this.db.run(
      `UPDATE {s}.operations SET next_poll_at = $3, unchanged_polls = $4, failed_polls = $5, not_found_polls = $6, poll_note = $7
       WHERE name = $1 AND version = $2 AND next_poll_at IS NOT NULL`,
      [name, version, poll.nextPollAt, poll.unchangedPolls, poll.failedPolls, poll.notFoundPolls, poll.note ?? null],
    );
    if (changed > 0 && poll.nextPollAt === null) this.options.onPollingStopped?.(name);
    return changed > 0;
  }

  async recordUnmapped(delivery: UnmappedDelivery): Promise<void> {
    await this.db.run(
      `INSERT INTO {s}.notes AS n (key, value) VALUES ($1, $2)
       ON CONFLICT (key) DO UPDATE
       SET value = (excluded.value::jsonb || jsonb_build_object('received', coalesce((n.value::jsonb ->> 'received')::int, 0) + 1))::text`,
      [UNMAPPED_NOTE, JSON.stringify({ ...delivery, received: 1 })],
    );
  }

  async lastUnmapped(): Promise<(UnmappedDelivery & { received: number }) | undefined> {
    const [row] = await this.db.rows<{ value: string }>('SELECT value FROM {s}.notes WHERE key = $1', [UNMAPPED_NOTE]);
    return row && JSON.parse(row.value);
  }
}
