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

/** The provider answered a state Ratchet has no mapping for: kept raw, never guessed. */
export class UnknownProviderStateError extends MalformedPollError {
  override name = 'UnknownProviderStateError';
  constructor(
    message: string,
    readonly raw: string,
  ) {
    super(message);
  }
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
  if (!state) throw new UnknownProviderStateError(`batch ${name}: unknown state ${JSON.stringify(batch.state)}`, String(batch.state));
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

/**
 * Interaction statuses. `incomplete` (the interaction ended before its output
 * was complete, e.g. a token limit) is FAILED: a receiver that publishes or
 * bills must not take it for a success; `providerState` says `incomplete`.
 */
export const INTERACTION_STATUSES: Readonly<Record<string, OperationState>> = {
  queued: 'PENDING',
  in_progress: 'RUNNING',
  requires_continuation: 'RUNNING',
  requires_action: 'REQUIRES_ACTION',
  completed: 'SUCCEEDED',
  failed: 'FAILED',
  budget_exceeded: 'FAILED',
  incomplete: 'FAILED',
  cancelled: 'CANCELLED',
};

/** What `interactions.get` answers, as far as Ratchet reads it. */
export interface InteractionAnswer {
  status?: string;
  /** Second precision: two answers in the same second never override each other at the same rank. */
  updated?: string;
  error?: { code?: number; message?: string; status?: string };
}

export function eventFromInteraction(name: string, interaction: InteractionAnswer): OperationEvent {
  const status = interaction.status;
  const state = status === undefined ? undefined : INTERACTION_STATUSES[status];
  if (!state) throw new UnknownProviderStateError(`interaction ${name}: unknown status ${JSON.stringify(status)}`, String(status));
  const error =
    interaction.error ?? (status === 'budget_exceeded' || status === 'incomplete' ? { status: status.toUpperCase() } : undefined);
  return {
    name,
    kind: 'interaction',
    state,
    providerState: status as string,
    ...(interaction.updated !== undefined && { updateTime: normalizeTimeOf(name, interaction.updated) }),
    source: 'poll',
    ...(error && state === 'FAILED' && { result: { error: errorOf(error) } }),
  };
}

/** What `operations.get` / `getVideosOperation` answer: a long-running operation, without timestamps. */
export interface OperationAnswer {
  done?: boolean;
  error?: { code?: number; message?: string; status?: string };
  response?: {
    generatedVideos?: Array<{ video?: { uri?: string } }>;
    /** Veo: how many videos the safety filters blocked, and why. */
    raiMediaFilteredCount?: number;
    raiMediaFilteredReasons?: string[];
  };
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
  const outputUri = operation.response?.generatedVideos?.find((v) => v.video?.uri)?.video?.uri;
  const filtered = filteredOf(operation.response);
  if (kind === 'video' && !outputUri) {
    // Done, no error and no video: Veo's safety filters blocked it (or it answered nothing usable). A failure, never a success.
    const message = filtered
      ? `blocked by safety filters: ${filtered.count} video(s) filtered${filtered.reasons.length > 0 ? ` (${filtered.reasons.join('; ')})` : ''}`
      : 'done without an error and without a video';
    return {
      ...base,
      state: 'FAILED',
      providerState: filtered ? 'DONE_FILTERED' : 'DONE_NO_VIDEO',
      result: { error: { status: filtered ? 'FILTERED' : 'NO_VIDEO', message }, ...(filtered && { filtered }) },
    };
  }
  const result: OperationResult = { ...(outputUri && { outputUri }), ...(filtered && { filtered }) };
  return { ...base, state: 'SUCCEEDED', providerState: 'DONE', ...(Object.keys(result).length > 0 && { result }) };
}

function filteredOf(response: OperationAnswer['response']): OperationResult['filtered'] {
  const count = Number(response?.raiMediaFilteredCount ?? 0);
  if (!(count > 0)) return undefined;
  const reasons = (response?.raiMediaFilteredReasons ?? []).filter((r): r is string => typeof r === 'string');
  return { count, reasons };
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
