/**
 * "Poll this operation now": how a delivery whose body cannot be trusted (a
 * dynamic webhook signed with a JWT, which does not cover the body) is turned
 * into a fact. The operation is made due (tracked first if unknown) and
 * reconcile is woken; what Gemini answers then goes through ingest like any poll.
 */
import type { OperationKind } from '../../core/lifecycle.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import type { OperationStore, PollRequests } from '../ports.ts';

export interface PollNowDeps {
  store: OperationStore & PollRequests;
  /** Starts a reconcile run soon (in AWS an asynchronous invocation; locally the schedule runs early). */
  wake: () => Promise<void>;
  clock?: () => Date;
}

/** 'terminal': already finished, nothing to poll. */
export async function pollNow(operation: { name: string; kind: OperationKind }, deps: PollNowDeps): Promise<'scheduled' | 'terminal'> {
  const now = timeFromDate((deps.clock ?? (() => new Date()))());
  const tracked = await deps.store.write(trackedRecord(operation.name, operation.kind, now), undefined);
  if (!tracked.ok && !(await deps.store.pollNow(operation.name, now))) return 'terminal';
  await deps.wake();
  return 'scheduled';
}
