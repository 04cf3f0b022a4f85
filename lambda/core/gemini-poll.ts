/**
 * Gemini poll answers -> canonical events. Pure; the SDK call happens in the
 * reconcile adapter. The provider's own state is kept in `providerState`.
 */
import type { OperationKind, OperationState } from './lifecycle.ts';
import { storableNumber } from './provider-values.ts';
import type { OperationEvent, OperationResult } from './reducer.ts';
import { normalizeTime } from './time.ts';

export class MalformedPollError extends Error {
  override name = 'MalformedPollError';
}

export const JOB_STATES: Readonly<Record<string, OperationState>> = {
  JOB_STATE_QUEUED: 'PENDING',
  JOB_STATE_PENDING: 'PENDING',
  JOB_STATE_RUNNING: 'RUNNING',
  JOB_STATE_UPDATING: 'RUNNING',
  JOB_STATE_PAUSED: 'RUNNING',
  JOB_STATE_CANCELLING: 'RUNNING',
  JOB_STATE_SUCCEEDED: 'SUCCEEDED',
  JOB_STATE_PARTIALLY_SUCCEEDED: 'SUCCEEDED',
  JOB_STATE_FAILED: 'FAILED',
  JOB_STATE_CANCELLED: 'CANCELLED',
  JOB_STATE_EXPIRED: 'EXPIRED',
};

/** What `batches.get` answers, as far as Ratchet reads it. */
export interface BatchAnswer {
  state?: string;
  updateTime?: string;
  error?: { code?: number; message?: string; status?: string };
  dest?: { fileName?: string };
}

export function eventFromBatch(name: string, batch: BatchAnswer): OperationEvent {
  const state = batch.state === undefined ? undefined : JOB_STATES[batch.state];
  if (!state) throw new MalformedPollError(`batch ${name}: unknown state ${JSON.stringify(batch.state)}`);
  const result: OperationResult = {
    ...(batch.dest?.fileName && { outputUri: batch.dest.fileName }),
    ...(batch.error && { error: errorOf(batch.error) }),
  };
  return {
    name,
    kind: 'batch',
    state,
    providerState: batch.state as string,
    ...(batch.updateTime !== undefined && { updateTime: normalizeTimeOf(name, batch.updateTime) }),
    source: 'poll',
    ...(Object.keys(result).length > 0 && { result }),
  };
}

/** What `operations.get` / `getVideosOperation` answer: a long-running operation, without timestamps. */
export interface OperationAnswer {
  done?: boolean;
  error?: { code?: number; message?: string; status?: string };
  response?: { generatedVideos?: Array<{ video?: { uri?: string } }> };
}

const GRPC_CANCELLED = 1;

export function eventFromOperation(name: string, kind: OperationKind, operation: OperationAnswer): OperationEvent {
  const base = { name, kind, source: 'poll' as const };
  if (operation.done !== true) return { ...base, state: 'RUNNING', providerState: 'RUNNING' };
  if (operation.error) {
    const cancelled = operation.error.code === GRPC_CANCELLED;
    return {
      ...base,
      state: cancelled ? 'CANCELLED' : 'FAILED',
      providerState: cancelled ? 'DONE_CANCELLED' : 'DONE_ERROR',
      result: { error: errorOf(operation.error) },
    };
  }
  const outputUri = operation.response?.generatedVideos?.[0]?.video?.uri;
  return { ...base, state: 'SUCCEEDED', providerState: 'DONE', ...(outputUri && { result: { outputUri } }) };
}

/** The fields Ratchet keeps of a google.rpc.Status; a code no DynamoDB number holds exactly is kept as text. */
function errorOf(error: { code?: number; message?: string; status?: string }): NonNullable<OperationResult['error']> {
  return {
    ...(error.code !== undefined && { code: storableNumber(error.code) }),
    ...(error.message !== undefined && { message: error.message }),
    ...(error.status !== undefined && { status: error.status }),
  };
}

function normalizeTimeOf(name: string, time: string): string {
  try {
    return normalizeTime(time);
  } catch (error) {
    throw new MalformedPollError(`${name}: ${(error as Error).message}`);
  }
}
