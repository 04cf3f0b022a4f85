/**
 * ingest(event): the one way an event reaches the store, for the webhook and
 * reconcile alike. The store applies it exactly when the reducer does, in one
 * atomic step (OperationStore.apply; how is the engine's own: a transaction,
 * or DynamoDB's compiled conditional write); a refusal hands back the stored
 * record and the pure reducer names the discard reason from it. With a record
 * at hand (reconcile's, or this process's recent writes), an event it already
 * discards costs no request at all: every stored version is at least as far
 * along (rank, then time, terminal absorbing).
 *
 * It throws NotRecordedError when the sender should retry, and
 * StoreRejectedError when the store refused the event for good.
 */
import { applyEvent, type DiscardReason, type OperationEvent, type OperationRecord } from '../core/reducer.ts';
import { timeFromDate } from '../core/time.ts';
import { type OperationStore, type PollNext, StoreRejectedError, WriteContentionError } from './ports.ts';

export type IngestResult = (
  | { outcome: 'applied'; record: OperationRecord; stateChanged: boolean; attempts: number }
  | { outcome: 'discarded'; reason: DiscardReason; record: OperationRecord; attempts: number }
) & {
  /** The poll's next time (`pollNext`) was written with the outcome. */
  scheduled?: boolean;
};

/** The event was neither recorded nor deliberately discarded: the sender must retry. */
export class NotRecordedError extends Error {
  override name = 'NotRecordedError';
  constructor(
    readonly reason: 'store-unavailable' | 'retries-exhausted',
    options?: { cause?: unknown },
  ) {
    super(`event not recorded: ${reason}`, options);
  }
}

export interface IngestDeps {
  store: OperationStore;
  clock?: () => Date;
  /**
   * The record as the caller last read it (reconcile holds it): a discard
   * against it is final without a request, and the store may use it to write
   * in one. Except a duplicate, which a later version may no longer be.
   */
  current?: OperationRecord;
  /**
   * Records this process wrote or saw lately (the API keeps one per
   * instance), each a version that really was stored: used as `current` when
   * the caller has none. A run of same-state refreshes (a hot operation) then
   * costs one request each, and a stale redelivery none.
   */
  hints?: RecentRecords;
  /** Applies attempted before giving up (another attempt only when the store refused what its answer shows applies). */
  maxAttempts?: number;
  /** A poll's next time, for a store that writes it with the outcome (reconcile's). */
  pollNext?: PollNext;
  /** The write's span, as `traceparent`, for the store to keep with the effect (WriteHint.traceparent). */
  traceparent?: string;
}

export async function ingest(event: OperationEvent, deps: IngestDeps): Promise<IngestResult> {
  const { store, clock = () => new Date(), maxAttempts = 10 } = deps;
  const now = () => timeFromDate(clock());
  let known = deps.current ?? deps.hints?.get(event.name);
  if (known) {
    const decision = applyEvent(known, event, now());
    if (!decision.applied && decision.reason !== 'duplicate') {
      const noted = await guard(async () =>
        store.noteDiscard?.(event, decision.reason, now(), { current: known, pollNext: deps.pollNext }),
      );
      return { outcome: 'discarded', reason: decision.reason, record: known, attempts: 0, scheduled: noted?.scheduled };
    }
  }
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const at = now();
    const outcome = await guard(() =>
      store.apply(event, at, { current: known, pollNext: deps.pollNext, ...(deps.traceparent && { traceparent: deps.traceparent }) }),
    );
    if (outcome.ok || outcome.current) deps.hints?.set(outcome.ok ? outcome.record : (outcome.current as OperationRecord));
    const { scheduled } = outcome;
    if (outcome.ok)
      return { outcome: 'applied', record: outcome.record, stateChanged: outcome.record.stateChanged, attempts: attempt, scheduled };
    const decision = applyEvent(outcome.current, event, at);
    // A discard only happens against a stored record with a state.
    if (!decision.applied)
      return { outcome: 'discarded', reason: decision.reason, record: outcome.current as OperationRecord, attempts: attempt, scheduled };
    // Refused, yet the reducer applies it against the record that came back: it moved between; again, knowing it.
    known = outcome.current;
  }
  throw new NotRecordedError('retries-exhausted');
}

/** A bounded map of the latest record seen per operation (oldest entries dropped first). */
export class RecentRecords {
  private readonly records = new Map<string, OperationRecord>();
  constructor(private readonly capacity = 10_000) {}

  get(name: string): OperationRecord | undefined {
    return this.records.get(name);
  }

  set(record: OperationRecord): void {
    const known = this.records.get(record.name);
    if (known && known.version >= record.version) return;
    this.records.delete(record.name);
    this.records.set(record.name, record);
    if (this.records.size > this.capacity) this.records.delete(this.records.keys().next().value as string);
  }
}

/** Store errors, classified once: a refusal (StoreRejectedError) passes as is, anything else means "retry later". */
async function guard<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (cause) {
    if (cause instanceof StoreRejectedError) throw cause;
    if (cause instanceof WriteContentionError) throw new NotRecordedError('retries-exhausted', { cause });
    throw new NotRecordedError('store-unavailable', { cause });
  }
}
