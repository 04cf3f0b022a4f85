/**
 * ingest(event): read -> pure reducer -> conditional write, retried on lost
 * races against the winner the store hands back. Both the webhook and
 * reconcile go through here. It throws NotRecordedError when the sender should
 * retry, and StoreRejectedError when the store refused the event for good.
 */
import { applyEvent, type DiscardReason, type OperationEvent, type OperationRecord } from './core/reducer.ts';
import { timeFromDate } from './core/time.ts';
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
  /** Conditional-write attempts before giving up (each lost race means another writer advanced). */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

const BACKOFF_BASE_MS = 5;
const BACKOFF_CAP_MS = 100;

export async function ingest(event: OperationEvent, deps: IngestDeps): Promise<IngestResult> {
  const { store, clock = () => new Date(), maxAttempts = 10, sleep = delay, random = Math.random } = deps;
  let current = await guard(() => store.get(event.name));
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const decision = applyEvent(current, event, timeFromDate(clock()));
    if (!decision.applied) {
      // A discard only happens against a stored record with a state.
      return { outcome: 'discarded', reason: decision.reason, record: current as OperationRecord, attempts: attempt };
    }
    const written = await guard(() => store.write(decision.next, current?.version));
    if (written.ok) return { outcome: 'applied', record: decision.next, stateChanged: decision.stateChanged, attempts: attempt };
    current = written.current;
    if (attempt < maxAttempts) await sleep(random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt));
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
