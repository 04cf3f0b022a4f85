/**
 * How the DynamoDB store applies an event, usually in one request: which
 * variant of the compiled write (compiled-write.ts) to send, the second
 * request when the refusal shows the other variant applies, and the
 * read-reduce-compare-version fallback for an item written before `rank` was
 * stored (which the condition cannot judge). All of it stays inside the
 * DynamoDB adapter: the application only calls OperationStore.apply.
 */

import { type ApplyOutcome, WriteContentionError, type WriteOutcome } from '../../app/ports.ts';
import { applyEvent, type OperationEvent, type OperationRecord } from '../../core/reducer.ts';
import type { Variant } from './compiled-write.ts';

/** One conditional request: applied, or refused with the stored item (`legacy`: it lacks `rank`, the condition could not judge). */
export type CompiledOutcome = { ok: true; record: OperationRecord } | { ok: false; current: OperationRecord | undefined; legacy: boolean };

export interface CompiledTable {
  send(event: OperationEvent, now: string, variant: Variant): Promise<CompiledOutcome>;
  /** Writes `next` if the stored version is still `expectedVersion`; the winner otherwise. */
  write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome>;
}

export interface CompiledApplyOptions {
  current?: OperationRecord;
  /** Compare-and-set attempts of the fallback before WriteContentionError. */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

const BACKOFF_BASE_MS = 5;
const BACKOFF_CAP_MS = 100;

export async function applyCompiled(
  table: CompiledTable,
  event: OperationEvent,
  now: string,
  options: CompiledApplyOptions = {},
): Promise<ApplyOutcome> {
  // A terminal state without its outcome, or the outcome after it, is the reducer's to write (the compiled condition
  // does not carry `resultPending`): rare, one write more than a compiled request.
  if (event.resultPending || options.current?.resultPending) return compareAndSet(table, event, now, options.current, options);
  // With no record at hand, most events change the state (a first or a terminal webhook).
  let variant: Variant = 'change';
  if (options.current) {
    const decision = applyEvent(options.current, event, now);
    if (decision.applied && !decision.stateChanged) variant = 'refresh';
  }
  // A refusal that the reducer applies with the other variant (a same-state refresh sent as a change, or a race
  // lost to a writer that changed the state) is sent again as that variant; a lost race never exhausts this, since
  // the winner's record either discards the event or says which variant applies.
  let last: OperationRecord | undefined;
  for (let request = 1; request <= SWITCHES + 1; request++) {
    const outcome = await table.send(event, now, variant);
    if (outcome.ok) return outcome;
    last = outcome.current;
    if (outcome.legacy || outcome.current?.resultPending) break;
    const decision = applyEvent(outcome.current, event, now);
    if (!decision.applied) return { ok: false, current: outcome.current };
    const right: Variant = decision.stateChanged ? 'change' : 'refresh';
    // The condition refused what the reducer applies with the same variant: they disagree, so trust the reducer.
    if (right === variant) break;
    variant = right;
  }
  return compareAndSet(table, event, now, last, options);
}

/** Variant switches before the compare-and-set fallback (each needs another writer to move the state between). */
const SWITCHES = 8;

/**
 * The fallback the compiled condition cannot do for: reduce against the
 * record, write on its version, reduce again against the winner on a lost race.
 */
async function compareAndSet(
  table: CompiledTable,
  event: OperationEvent,
  now: string,
  stored: OperationRecord | undefined,
  options: CompiledApplyOptions,
): Promise<ApplyOutcome> {
  const { maxAttempts = 10, sleep = delay, random = Math.random } = options;
  let current = stored;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const decision = applyEvent(current, event, now);
    if (!decision.applied) return { ok: false, current };
    const written = await table.write(decision.next, current?.version);
    if (written.ok) return { ok: true, record: decision.next };
    current = written.current;
    if (attempt < maxAttempts) await sleep(random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt));
  }
  throw new WriteContentionError(`${event.name}: ${maxAttempts} compare-and-set attempts lost to other writers`);
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
