/**
 * The operations store on PostgreSQL, for any number of instances on one
 * database. A write is a compare-and-set on the version read: in one
 * transaction the record moves only if it is still at that version, and its
 * change-log row, history entry, effect (a state change, with effects on) and
 * decision are written with it. A lost race (another instance wrote the same
 * operation meanwhile) reads again and reduces again; past MAX_ATTEMPTS it is
 * WriteContentionError (the webhook answers 503 and Gemini sends it again).
 *
 * The same ports as the SQLite and DynamoDB stores, held to the same
 * conformance suite.
 */

import { transitionOf } from '../../app/effects/transition.ts';
import { entryOf } from '../../app/history.ts';
import {
  type ApplyOutcome,
  type Decision,
  type DecisionLog,
  type DeliveryReceipts,
  type ListFilter,
  type OperationQueries,
  type OperationStore,
  type OperationView,
  type PollCandidate,
  type PollRequests,
  type PollSchedule,
  type PollState,
  type UnmappedDelivery,
  type UnprocessableDelivery,
  type UnprocessableLog,
  WriteContentionError,
  type WriteOutcome,
} from '../../app/ports.ts';
import { sendsEffect, writeKindOf } from '../../core/change.ts';
import { isTerminal, OPERATION_STATES, type OperationKind, type OperationState } from '../../core/lifecycle.ts';
import { applyEvent, type DiscardReason, type OperationEvent, type OperationRecord } from '../../core/reducer.ts';
import { timeAfter, timeFromDate } from '../../core/time.ts';
import { appliedDecisionOf, decisionOf, type OperationRow, pageKeyOf, pageOf, pollOf, viewOf } from '../sql/rows.ts';
import type { Postgres, Queryable } from './database.ts';

/** Tries of one write against racing instances before WriteContentionError. */
export const MAX_ATTEMPTS = 8;
const UNMAPPED_NOTE = 'unmapped-delivery';
/** Decisions kept per operation (and 30 days, see pruneDecisions), as on SQLite. */
export const DECISIONS_KEPT = 200;
export const DECISION_RETENTION_DAYS = 30;

export interface PostgresStoreOptions {
  historyRetentionDays: number;
  /** Whether each state change also queues its effect (the outbound webhook is on). */
  effects: boolean;
  /** After each commit that applied a write, in this instance (its feed's waiters wake at once; others' by NOTIFY or poll). */
  onChange?: (name: string) => void;
  /** Reconcile stopped polling an open operation: waiters on it read it again. */
  onPollingStopped?: (name: string) => void;
}

export class PostgresOperationStore
  implements OperationStore, OperationQueries, PollSchedule, PollRequests, DeliveryReceipts, DecisionLog, UnprocessableLog
{
  constructor(
    private readonly db: Postgres,
    private readonly options: PostgresStoreOptions,
  ) {}

  private async row(name: string, on?: Queryable): Promise<OperationRow | undefined> {
    const [row] = await this.db.rows<OperationRow>('SELECT * FROM {s}.operations WHERE name = $1', [name], on);
    return row;
  }

  async get(name: string): Promise<OperationRecord | undefined> {
    const row = await this.row(name);
    return row && (JSON.parse(row.record) as OperationRecord);
  }

  async write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome> {
    const outcome = await this.db.transaction(async (tx): Promise<WriteOutcome> => {
      if (!(await this.store(tx, expectedVersion, next))) {
        const row = await this.row(next.name, tx);
        return { ok: false, current: row && (JSON.parse(row.record) as OperationRecord) };
      }
      await this.decide(tx, next.name, appliedDecisionOf(next));
      return { ok: true };
    });
    if (outcome.ok) this.options.onChange?.(next.name);
    return outcome;
  }

  /** Read, reduce, compare-and-set, in one transaction; again from the read when another instance won the race. */
  async apply(event: OperationEvent, now: string): Promise<ApplyOutcome> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const outcome = await this.db.transaction(async (tx): Promise<ApplyOutcome | 'lost'> => {
        const row = await this.row(event.name, tx);
        const current = row && (JSON.parse(row.record) as OperationRecord);
        const decision = applyEvent(current, event, now);
        if (!decision.applied) {
          await this.decide(tx, event.name, decisionOf(event, now, { verdict: 'discarded', reason: decision.reason }));
          return { ok: false, current };
        }
        if (!(await this.store(tx, current?.version, decision.next))) return 'lost';
        await this.decide(tx, event.name, decisionOf(event, now, { verdict: 'applied', version: decision.next.version }));
        return { ok: true, record: decision.next };
      });
      if (outcome === 'lost') continue;
      if (outcome.ok) this.options.onChange?.(event.name);
      return outcome;
    }
    throw new WriteContentionError(`${event.name}: ${MAX_ATTEMPTS} attempts lost to concurrent writes`);
  }

  /**
   * The record, only if it is still at `expectedVersion` (undefined: only if
   * none is stored), with its change, history entry and effect; false when
   * another write got there first. In the caller's transaction.
   *
   * The change's order key is this transaction's id, or the operation's last
   * change's key if that is higher (it committed before this write could take
   * the row): each operation's changes read in version order.
   */
  private async store(tx: Queryable, expectedVersion: number | undefined, next: OperationRecord): Promise<boolean> {
    const open = !isTerminal(next.state);
    const record = JSON.stringify(next);
    const values = [next.name, next.kind, next.state, next.version, next.recordedAt, record, open ? next.recordedAt : null];
    const written =
      expectedVersion === undefined
        ? await this.db.rows<{ change_key: string }>(
            `INSERT INTO {s}.operations (name, kind, state, version, recorded_at, record, next_poll_at, created_at, change_key)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, pg_current_xact_id())
             ON CONFLICT (name) DO NOTHING RETURNING change_key`,
            [...values, next.createdAt],
            tx,
          )
        : await this.db.rows<{ change_key: string }>(
            `UPDATE {s}.operations SET kind = $2, state = $3, version = $4, recorded_at = $5, record = $6,
               next_poll_at = CASE WHEN $7::text IS NULL THEN NULL ELSE coalesce(next_poll_at, $7::text) END,
               change_key = greatest(pg_current_xact_id(), change_key)
             WHERE name = $1 AND version = $8 RETURNING change_key`,
            [...values, expectedVersion],
            tx,
          );
    const [stored] = written;
    if (!stored) return false;
    const writeKind = writeKindOf(next);
    await this.db.run(
      'INSERT INTO {s}.changes (tx, name, version, write_kind, new_record) VALUES ($1, $2, $3, $4, $5)',
      [stored.change_key, next.name, next.version, writeKind, record],
      tx,
    );
    const expiresAt = Math.floor(Date.parse(next.recordedAt) / 1000) + this.options.historyRetentionDays * 86_400;
    await this.db.run(
      'INSERT INTO {s}.history (name, version, entry, expires_at) VALUES ($1, $2, $3, $4) ON CONFLICT (name, version) DO NOTHING',
      [next.name, next.version, JSON.stringify(entryOf(next as unknown as Record<string, unknown>)), expiresAt],
      tx,
    );
    if (this.options.effects && sendsEffect(writeKind))
      await this.db.run(
        'INSERT INTO {s}.effects (name, version, transition) VALUES ($1, $2, $3) ON CONFLICT (name, version) DO NOTHING',
        [next.name, next.version, JSON.stringify(transitionOf(next))],
        tx,
      );
    return true;
  }

  async noteDiscard(event: OperationEvent, heldReason: DiscardReason, now: string): Promise<void> {
    await this.db.transaction(async (tx) => {
      const row = await this.row(event.name, tx);
      const stored = row && applyEvent(JSON.parse(row.record) as OperationRecord, event, now);
      const reason = stored && !stored.applied ? stored.reason : heldReason;
      await this.decide(tx, event.name, decisionOf(event, now, { verdict: 'discarded', reason }));
    });
  }

  async note(name: string, decision: Decision): Promise<void> {
    await this.db.transaction((tx) => this.decide(tx, name, decision));
  }

  /** One decision; the operation keeps its last DECISIONS_KEPT (trimmed now and then, not on every write). */
  private async decide(tx: Queryable, name: string, decision: Decision): Promise<void> {
    const [row] = await this.db.rows<{ id: string }>(
      'INSERT INTO {s}.decisions (name, decision, at) VALUES ($1, $2, $3) RETURNING id',
      [name, JSON.stringify(decision), Date.now()],
      tx,
    );
    if (Number(row?.id) % 50 === 0)
      await this.db.run(
        `DELETE FROM {s}.decisions WHERE name = $1 AND id <= (SELECT id FROM {s}.decisions WHERE name = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`,
        [name, DECISIONS_KEPT],
        tx,
      );
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
    if (filter.effects === 'retrying') where.push('name IN (SELECT name FROM {s}.effects WHERE last_error IS NOT NULL)');
    if (filter.effects === 'dead-lettered')
      where.push("name IN (SELECT operation FROM {s}.dead_letters WHERE status = 'dead' AND operation NOT LIKE '#%')");
    if (filter.overdue)
      where.push(`record::jsonb ? 'overdue' AND (state IS NULL OR NOT (state = ANY(${param(OPERATION_STATES.filter(isTerminal))})))`);
    if (after) where.push(`(recorded_at, name) < (${param(after[0])}, ${param(after[1])})`);
    const rows = await this.db.rows<OperationRow>(
      `SELECT * FROM {s}.operations ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY recorded_at DESC, name DESC LIMIT $1`,
      params,
    );
    const { taken, nextCursor } = pageOf(rows, filter.limit, (row) => [row.recorded_at, row.name]);
    return { operations: taken.map(viewOf), ...(nextCursor && { nextCursor }) };
  }

  /** The console's counts: operations per state (`null`: tracked, nothing observed yet) and kind, and how many of them are open and overdue. */
  async counts(): Promise<Array<{ state: OperationState | null; kind: OperationKind; count: number; overdue: number }>> {
    const rows = await this.db.rows<{ state: OperationState | null; kind: OperationKind; count: string; overdue: string }>(
      `SELECT state, kind, count(*) AS count,
         count(*) FILTER (WHERE (state IS NULL OR NOT (state = ANY($1))) AND record::jsonb ? 'overdue') AS overdue
       FROM {s}.operations GROUP BY state, kind`,
      [OPERATION_STATES.filter(isTerminal)],
    );
    return rows.map((row) => ({ ...row, count: Number(row.count), overdue: Number(row.overdue) }));
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
    if (filter.overdue) where.push(`record::jsonb ? 'overdue' AND (state IS NULL OR NOT (state = ANY($3)))`);
    const rows = await this.db.rows<OperationRow>(
      `SELECT * FROM {s}.operations ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY coalesce(state = ANY($3), false), recorded_at DESC, name DESC LIMIT $1 OFFSET $2`,
      params,
    );
    return rows.map(viewOf);
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
      .map((row) => ({ record: JSON.parse(row.record) as OperationRecord, poll: { ...pollOf(row), nextPollAt: row.was } }));
  }

  async pollNow(name: string, now: string): Promise<boolean> {
    const terminal = OPERATION_STATES.filter(isTerminal);
    const changed = await this.db.run(
      `UPDATE {s}.operations SET next_poll_at = $2, unchanged_polls = 0, failed_polls = 0, not_found_polls = 0, poll_note = NULL
       WHERE name = $1 AND (state IS NULL OR NOT (state = ANY($3)))`,
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
