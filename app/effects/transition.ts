/**
 * A state change (what an applied write made, as its effects see it), and
 * the outbound event it becomes. Pure: each engine hands its changes over as
 * records (the AWS edge reads them from stream records: stream-records.ts).
 */
import { providerOf } from '../../core/lifecycle.ts';
import type { OperationRecord } from '../../core/reducer.ts';

export type Transition = Pick<
  OperationRecord,
  | 'name'
  | 'kind'
  | 'provider'
  | 'state'
  | 'previousState'
  | 'version'
  | 'updateTime'
  | 'providerState'
  | 'result'
  | 'userMetadata'
  | 'recordedAt'
> & {
  /** Set on the write that found the job overdue: its effect is `operation.overdue`, not a state change. */
  overdue?: { at: string; afterSeconds: number; openSince: string };
  /** Set on the write that learnt a terminal job's outcome after its state: its effect is `operation.result`. */
  resultWrite?: true;
};

/** A record no retry can decode: dead-lettered at once, never retried. */
export class InvalidStreamRecordError extends Error {
  override name = 'InvalidStreamRecordError';
}

/** The transition an applied write made, from its record (or a transition itself); `what` names it in the error. */
export function transitionOf(item: OperationRecord | Transition, what = 'the change'): Transition {
  if (typeof item?.name !== 'string' || typeof item.version !== 'number') {
    throw new InvalidStreamRecordError(`${what} is not an operation`);
  }
  return {
    name: item.name,
    kind: item.kind,
    provider: item.provider ?? providerOf(item.kind),
    state: item.state,
    previousState: item.previousState ?? null,
    version: item.version,
    updateTime: item.updateTime ?? null,
    providerState: item.providerState ?? null,
    result: item.result ?? null,
    // Only operations started with a dynamic webhook's user_metadata carry it.
    ...(item.userMetadata && { userMetadata: item.userMetadata }),
    ...overdueOf(item),
    ...(item.resultWrite && { resultWrite: true }),
    recordedAt: item.recordedAt,
  };
}

/** A record written by the overdue mark (or a transition made from one) carries what its effect says of it. */
function overdueOf(item: OperationRecord | Transition): Pick<Transition, 'overdue'> {
  if ('source' in item && item.source === 'overdue' && item.overdue)
    return { overdue: { at: item.overdue.at, afterSeconds: item.overdue.afterSeconds, openSince: item.createdAt } };
  if (!('source' in item) && item.overdue) return { overdue: item.overdue as Transition['overdue'] };
  return {};
}

/** The stable id of a transition: the same on every retry and replay, so sinks can apply it once. */
export function idempotencyKey(transition: Pick<Transition, 'name' | 'version'>): string {
  return `${transition.name}#${transition.version}`;
}

export const STATE_CHANGED_TYPE = 'operation.state_changed';
/** The effect of a job found open past its kind's limit (OVERDUE_AFTER): once per job, in order with its state changes. */
export const OVERDUE_TYPE = 'operation.overdue';
/** The effect of a terminal job's outcome learnt after its state (a bare webhook ended it): once, after that state's. */
export const RESULT_TYPE = 'operation.result';
export type EffectType = typeof STATE_CHANGED_TYPE | typeof OVERDUE_TYPE | typeof RESULT_TYPE;

/** The outbound event (webhook body; EventBridge detail is its `data`). Stable across retries. */
export function effectEvent(transition: Transition): {
  type: EffectType;
  timestamp: string;
  data: Omit<Transition, 'recordedAt' | 'resultWrite'>;
} {
  const { recordedAt, resultWrite, ...data } = transition;
  const type = transition.overdue ? OVERDUE_TYPE : resultWrite ? RESULT_TYPE : STATE_CHANGED_TYPE;
  return { type, timestamp: recordedAt, data };
}
