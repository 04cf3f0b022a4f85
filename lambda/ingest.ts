/**
 * ingest(event): one conditional write that encodes the reducer's order
 * (store.apply, see store/compiled-write.ts), no read. A refusal hands back the
 * stored record and the pure reducer names the discard reason from it. Both
 * the webhook and reconcile go through here. It throws NotRecordedError when
 * the sender should retry, and StoreRejectedError when the store refused the
 * event for good.
 *
 * The loop runs again only where the condition cannot decide alone: the
 * write was sent as a state change and the event turned out to be a
 * same-state refresh (or the other way round), which only the stored record
 * tells. A lost race never exhausts it: the winner's record either discards
 * the event or says which variant applies. Items written before `rank` was
 * stored (`legacy`) fall back to read-reduce-compare-version.
 */
import { applyEvent, type DiscardReason, type OperationEvent, type OperationRecord } from './core/reducer.ts';
import { timeFromDate } from './core/time.ts';
import type { Variant } from './store/compiled-write.ts';
import { type OperationStore, StoreRejectedError } from './store/operation-store.ts';

export type IngestResult =
  | { outcome: 'applied'; record: OperationRecord; stateChanged: boolean; attempts: number }
  | { outcome: 'discarded'; reason: DiscardReason; record: OperationRecord; attempts: number };

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
   * The record as the caller last read it (reconcile holds it). It picks the
   * write's variant, and a discard against it is final without a request:
   * every stored version is at least as far along (rank, then time, terminal
   * absorbing), so what an earlier version discards, the stored one discards
   * too. Except a duplicate, which a later version may no longer be.
   */
  current?: OperationRecord;
  /**
   * Records this process wrote or saw lately (the API keeps one per
   * instance), each a version that really was stored: used as `current` when
   * the caller has none. A run of same-state refreshes (a hot operation) then
   * costs one request each, and a stale redelivery none.
   */
  hints?: RecentRecords;
  /** Conditional-write attempts before giving up (each lost race means another writer advanced). */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

const BACKOFF_BASE_MS = 5;
const BACKOFF_CAP_MS = 100;

export async function ingest(event: OperationEvent, deps: IngestDeps): Promise<IngestResult> {
  const { store, clock = () => new Date(), maxAttempts = 10 } = deps;
  const now = () => timeFromDate(clock());
  // With no record at hand, most events change the state (a first or a terminal webhook).
  let variant: Variant = 'change';
  const known = deps.current ?? deps.hints?.get(event.name);
  if (known) {
    const decision = applyEvent(known, event, now());
    if (!decision.applied && decision.reason !== 'duplicate') {
      await guard(async () => store.noteDiscard?.(event, decision.reason, now()));
      return { outcome: 'discarded', reason: decision.reason, record: known, attempts: 0 };
    }
    if (decision.applied && !decision.stateChanged) variant = 'refresh';
  }
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const at = now();
    const outcome = await guard(() => store.apply(event, at, variant));
    if (outcome.ok || outcome.current) deps.hints?.set(outcome.ok ? outcome.record : (outcome.current as OperationRecord));
    // The written record says whether it changed the state (the variant, in DynamoDB; the reducer, in SQLite).
    if (outcome.ok) return { outcome: 'applied', record: outcome.record, stateChanged: outcome.record.stateChanged, attempts: attempt };
    if (outcome.legacy) return compareAndSwap(event, outcome.current, deps, attempt);
    const decision = applyEvent(outcome.current, event, at);
    // A discard only happens against a stored record with a state.
    if (!decision.applied)
      return { outcome: 'discarded', reason: decision.reason, record: outcome.current as OperationRecord, attempts: attempt };
    const right: Variant = decision.stateChanged ? 'change' : 'refresh';
    // The condition refused what the reducer applies with the same variant: they disagree, so trust the reducer.
    if (right === variant) return compareAndSwap(event, outcome.current, deps, attempt);
    variant = right;
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

/**
 * The fallback for items the compiled condition cannot judge: reduce against
 * the record, write on its version, re-reduce against the winner on a lost race.
 */
async function compareAndSwap(
  event: OperationEvent,
  stored: OperationRecord | undefined,
  deps: IngestDeps,
  attemptsSoFar: number,
): Promise<IngestResult> {
  const { store, clock = () => new Date(), maxAttempts = 10, sleep = delay, random = Math.random } = deps;
  let current = stored;
  for (let attempt = attemptsSoFar + 1; attempt <= attemptsSoFar + maxAttempts; attempt++) {
    const decision = applyEvent(current, event, timeFromDate(clock()));
    if (!decision.applied) return { outcome: 'discarded', reason: decision.reason, record: current as OperationRecord, attempts: attempt };
    const written = await guard(() => store.write(decision.next, current?.version));
    if (written.ok) return { outcome: 'applied', record: decision.next, stateChanged: decision.stateChanged, attempts: attempt };
    current = written.current;
    if (attempt < attemptsSoFar + maxAttempts)
      await sleep(random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempt - attemptsSoFar)));
  }
  throw new NotRecordedError('retries-exhausted');
}

/** Store errors, classified once: a refusal (StoreRejectedError) passes as is, anything else means "retry later". */
async function guard<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (cause) {
    if (cause instanceof StoreRejectedError) throw cause;
    throw new NotRecordedError('store-unavailable', { cause });
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
