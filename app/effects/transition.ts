/**
 * A state change (what an applied write made, as its effects see it), and
 * the outbound event it becomes. Pure: each engine hands its changes over as
 * records (the AWS edge reads them from stream records: stream-records.ts).
 */
import type { OperationRecord } from '../../core/reducer.ts';

export type Transition = Pick<
  OperationRecord,
  'name' | 'kind' | 'state' | 'previousState' | 'version' | 'updateTime' | 'providerState' | 'result' | 'userMetadata' | 'recordedAt'
>;

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
    state: item.state,
    previousState: item.previousState ?? null,
    version: item.version,
    updateTime: item.updateTime ?? null,
    providerState: item.providerState ?? null,
    result: item.result ?? null,
    // Only operations started with a dynamic webhook's user_metadata carry it.
    ...(item.userMetadata && { userMetadata: item.userMetadata }),
    recordedAt: item.recordedAt,
  };
}

/** The stable id of a transition: the same on every retry and replay, so sinks can apply it once. */
export function idempotencyKey(transition: Pick<Transition, 'name' | 'version'>): string {
  return `${transition.name}#${transition.version}`;
}

export const STATE_CHANGED_TYPE = 'operation.state_changed';

/** The outbound event (webhook body; EventBridge detail is its `data`). Stable across retries. */
export function stateChangedEvent(transition: Transition) {
  const { recordedAt, ...data } = transition;
  return { type: STATE_CHANGED_TYPE, timestamp: recordedAt, data };
}
