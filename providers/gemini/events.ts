/**
 * Gemini poll answers -> canonical events. Pure; the SDK call happens in the
 * reconcile adapter. The provider's own state is kept in `providerState`.
 */
import type { OperationKind, OperationState } from '../../core/lifecycle.ts';
import { storableNumber } from '../../core/provider-values.ts';
import type { OperationEvent, OperationResult } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { type ListedBatch, type ProviderPoller, UnknownProviderStateError } from '../port.ts';

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

/**
 * What a batch answers, as far as Ratchet reads it: a Gemini API batch
 * (`dest.fileName`, `batchStats`; see batchAnswerOf) or an Agent Platform
 * batch prediction job as `batches.get` answers it (`outputInfo`: where the
 * output was written, or `dest` as configured; `completionStats`).
 */
export interface BatchAnswer {
  state?: string;
  updateTime?: string;
  error?: { code?: number; message?: string; status?: string };
  dest?: { fileName?: string; gcsUri?: string; bigqueryUri?: string };
  outputInfo?: { gcsOutputDirectory?: string; bigqueryOutputTable?: string; bigqueryOutputDataset?: string };
  /** The Gemini API's request counts (int64, so JSON strings). */
  batchStats?: { requestCount?: Count; successfulRequestCount?: Count; failedRequestCount?: Count; pendingRequestCount?: Count };
  /** The Agent Platform's counts (int64 strings; `incompleteCount` -1 when unknown). */
  completionStats?: { successfulCount?: Count; failedCount?: Count; incompleteCount?: Count };
}

/** An int64 as Google's JSON spells it (a string), or a number. */
type Count = string | number;

/**
 * A Gemini API batch as `GET batches/{id}` answers it (a long-running
 * operation: the batch in `metadata`, `BATCH_STATE_*`), read into a
 * BatchAnswer. The SDK's `batches.get` drops `batchStats` and a failed
 * batch's `error`, so reconcile reads the answer itself; the states are
 * spelled `JOB_STATE_*` as the SDK spells them (`providerState` unchanged
 * from earlier versions).
 */
export function batchAnswerOf(answer: {
  metadata?: Record<string, unknown>;
  error?: BatchAnswer['error'];
  response?: Record<string, unknown>;
}): BatchAnswer {
  const batch = (answer.metadata ?? {}) as Record<string, unknown> & {
    state?: string;
    updateTime?: string;
    output?: { responsesFile?: string };
    batchStats?: BatchAnswer['batchStats'];
  };
  const state = typeof batch.state === 'string' ? batch.state.replace(/^BATCH_STATE_/, 'JOB_STATE_') : undefined;
  const responsesFile =
    batch.output?.responsesFile ?? (answer.response as { responsesFile?: string } | undefined)?.responsesFile ?? undefined;
  return {
    ...(state !== undefined && { state }),
    ...(typeof batch.updateTime === 'string' && { updateTime: batch.updateTime }),
    ...(answer.error && { error: answer.error }),
    ...(responsesFile && { dest: { fileName: responsesFile } }),
    ...(batch.batchStats && { batchStats: batch.batchStats }),
  };
}

/**
 * The one rule for partial outcomes: a job that ended with its output written
 * is SUCCEEDED, even when some of its requests failed (`JOB_STATE_PARTIALLY_SUCCEEDED`:
 * each failure is a line of the output, `providerState` says so); a job that
 * stopped before its output was whole is FAILED (an interaction `incomplete`,
 * `requires_continuation` or `budget_exceeded`), with `result.error.status` naming why.
 */
export function eventFromBatch(name: string, kind: 'batch' | 'platform-batch', batch: BatchAnswer): OperationEvent {
  const state = batch.state === undefined ? undefined : JOB_STATES[batch.state];
  if (!state) throw new UnknownProviderStateError(String(batch.state), `batch ${name}: unknown state ${JSON.stringify(batch.state)}`);
  const outputUri =
    batch.dest?.fileName ??
    batch.outputInfo?.gcsOutputDirectory ??
    batch.outputInfo?.bigqueryOutputTable ??
    batch.dest?.gcsUri ??
    batch.dest?.bigqueryUri;
  const batchStats = batchStatsOf(batch);
  const result: OperationResult = {
    ...(outputUri && { outputUri }),
    ...(batch.error && { error: errorOf(batch.error) }),
    ...(batchStats && { batchStats }),
  };
  return {
    name,
    kind,
    state,
    providerState: batch.state as string,
    ...(batch.updateTime !== undefined && { updateTime: normalizeTimeOf(name, batch.updateTime) }),
    source: 'poll',
    ...(Object.keys(result).length > 0 && { result }),
  };
}

/** A batch's request counts, named as the Gemini API names them; an Agent Platform job's completion counts read the same way. */
function batchStatsOf(batch: BatchAnswer): OperationResult['batchStats'] {
  const stats: NonNullable<OperationResult['batchStats']> = {};
  const set = (field: keyof typeof stats, value: Count | undefined) => {
    const count = countOf(value);
    if (count !== undefined) stats[field] = count;
  };
  if (batch.batchStats) {
    set('requestCount', batch.batchStats.requestCount);
    set('successfulRequestCount', batch.batchStats.successfulRequestCount);
    set('failedRequestCount', batch.batchStats.failedRequestCount);
    set('pendingRequestCount', batch.batchStats.pendingRequestCount);
  } else if (batch.completionStats) {
    const { successfulCount, failedCount, incompleteCount } = batch.completionStats;
    set('successfulRequestCount', successfulCount);
    set('failedRequestCount', failedCount);
    set('pendingRequestCount', incompleteCount); // -1 (unknown) is left out
    const parts = [stats.successfulRequestCount, stats.failedRequestCount, stats.pendingRequestCount];
    if (parts.every((part) => typeof part === 'number')) stats.requestCount = (parts as number[]).reduce((a, b) => a + b, 0);
  }
  return Object.keys(stats).length > 0 ? stats : undefined;
}

/** A non-negative count, as a number when exact (an int64 past 2^53 kept as its text); anything else left out. */
function countOf(value: Count | undefined): number | string | undefined {
  if (value === undefined || value === null) return undefined;
  const text = String(value).trim();
  if (!/^\d{1,30}$/.test(text)) return undefined;
  return Number.isSafeInteger(Number(text)) ? Number(text) : text;
}

/**
 * Interaction statuses. `incomplete` (the interaction ended before its output
 * was complete, e.g. a token limit) is FAILED: a receiver that publishes or
 * bills must not take it for a success; `providerState` says `incomplete`.
 * `requires_continuation` is FAILED too: the interaction that reports it has
 * stopped for good (its continuation is a new interaction, with
 * `previous_interaction_id` and the `continuation_token`), so it is never
 * polled again and `waitFor` is told at once. `idle` (@google/genai 3.6:
 * the interaction finished its work and waits for the caller's next turn;
 * `requires_action` is deprecated in its favour) is REQUIRES_ACTION, open and
 * polled on, `providerState: "idle"`.
 */
export const INTERACTION_STATUSES: Readonly<Record<string, OperationState>> = {
  queued: 'PENDING',
  in_progress: 'RUNNING',
  requires_continuation: 'FAILED',
  requires_action: 'REQUIRES_ACTION',
  idle: 'REQUIRES_ACTION',
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
  /** The Interactions resource's failures: `code` is a URI naming the error type. */
  errors?: Array<{ code?: string; message?: string }>;
  /** Older answers (and the SDK's 2.x shapes) carried one google.rpc.Status. */
  error?: { code?: number; message?: string; status?: string };
  /** What the interaction did; the model's output (text, images, a video) is in `model_output` steps. */
  steps?: Array<{ type?: string; content?: Array<{ type?: string; uri?: string; mime_type?: string }> }>;
  /** Token counts so far (the whole interaction's on `completed`). */
  usage?: {
    total_input_tokens?: number;
    total_output_tokens?: number;
    total_tokens?: number;
    total_cached_tokens?: number;
    total_thought_tokens?: number;
    total_tool_use_tokens?: number;
  };
}

/** Why a FAILED interaction failed when its answer says no more than its status. */
const STATUS_ERRORS: Readonly<Record<string, { status: string; message: string }>> = {
  budget_exceeded: { status: 'BUDGET_EXCEEDED', message: 'the interaction ran out of its budget' },
  incomplete: { status: 'INCOMPLETE', message: 'the interaction ended before its output was complete' },
  requires_continuation: {
    status: 'REQUIRES_CONTINUATION',
    message:
      'the interaction stopped at its decode limit and will not go on by itself: continue it with a new interaction ' +
      '(previous_interaction_id and the continuation_token Gemini answered)',
  },
};

export function eventFromInteraction(
  name: string,
  kind: 'interaction' | 'platform-interaction',
  interaction: InteractionAnswer,
): OperationEvent {
  const status = interaction.status;
  const state = status === undefined ? undefined : INTERACTION_STATUSES[status];
  if (!state) throw new UnknownProviderStateError(String(status), `interaction ${name}: unknown status ${JSON.stringify(status)}`);
  const error = state === 'FAILED' ? interactionErrorOf(interaction, status as string) : undefined;
  const outputUri = state === 'SUCCEEDED' ? outputUriOf(interaction.steps) : undefined;
  const usage = usageOf(interaction.usage);
  const result: OperationResult = { ...(outputUri && { outputUri }), ...(error && { error }), ...(usage && { usage }) };
  return {
    name,
    kind,
    state,
    providerState: status as string,
    ...(interaction.updated !== undefined && { updateTime: normalizeTimeOf(name, interaction.updated) }),
    source: 'poll',
    ...(Object.keys(result).length > 0 && { result }),
  };
}

/** An interaction's token counts, under shorter names (Gemini's `total_input_tokens` is `inputTokens`). */
function usageOf(usage: InteractionAnswer['usage']): OperationResult['usage'] {
  if (!usage || typeof usage !== 'object') return undefined;
  const fields = {
    inputTokens: usage.total_input_tokens,
    outputTokens: usage.total_output_tokens,
    totalTokens: usage.total_tokens,
    cachedTokens: usage.total_cached_tokens,
    thoughtTokens: usage.total_thought_tokens,
    toolUseTokens: usage.total_tool_use_tokens,
  };
  const counts: NonNullable<OperationResult['usage']> = {};
  for (const [field, value] of Object.entries(fields)) {
    const count = countOf(value);
    if (count !== undefined) counts[field as keyof typeof counts] = count;
  }
  return Object.keys(counts).length > 0 ? counts : undefined;
}

/** `errors[]` (the first one's code, kept as text, and every message), else the older `error`, else what the status says. */
function interactionErrorOf(interaction: InteractionAnswer, status: string): OperationResult['error'] {
  const errors = (interaction.errors ?? []).filter((e) => e && (e.code !== undefined || e.message !== undefined));
  if (errors.length > 0) {
    const messages = errors.map((e) => e.message).filter((m): m is string => typeof m === 'string');
    return {
      ...(errors[0]?.code !== undefined && { code: String(errors[0].code) }),
      ...(messages.length > 0 && { message: messages.join('; ') }),
      ...(STATUS_ERRORS[status] && { status: STATUS_ERRORS[status].status }),
    };
  }
  if (interaction.error) return errorOf(interaction.error);
  return STATUS_ERRORS[status];
}

/**
 * Where the interaction's output lives, when it was delivered by URI
 * (`response_format: {type: "video", delivery: "uri"}`): a video first, else
 * any media. An output returned inline has no URI, and its bytes are never kept.
 */
function outputUriOf(steps: InteractionAnswer['steps']): string | undefined {
  const media = (steps ?? [])
    .filter((step) => step?.type === 'model_output')
    .flatMap((step) => step.content ?? [])
    .filter((item) => typeof item?.uri === 'string' && item.uri.length > 0);
  return (media.find((item) => item.type === 'video') ?? media[0])?.uri;
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
  if ((kind === 'video' || kind === 'platform-video') && !outputUri) {
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

/**
 * A File Search store's import or upload (`fileSearchStores/{s}/operations/{o}`,
 * `…/upload/operations/{o}`), as `GET {name}` answers it: not done is RUNNING
 * (no time: it never overrides a same-rank state), `done` with `error` FAILED,
 * `done` with `response` SUCCEEDED, the response (the document it made) kept
 * in the result.
 */
export function eventFromFileSearch(name: string, operation: OperationAnswer & { response?: unknown }): OperationEvent {
  const base = { name, kind: 'file-search' as const, source: 'poll' as const };
  if (operation.done !== true) return { ...base, state: 'RUNNING', providerState: 'RUNNING' };
  if (operation.error) return { ...base, state: 'FAILED', providerState: 'DONE_ERROR', result: { error: errorOf(operation.error) } };
  const response = storableJson(operation.response);
  return { ...base, state: 'SUCCEEDED', providerState: 'DONE', ...(response && { result: { response } }) };
}

/** What `tunings.get` answers (an Agent Platform tuning job), as far as Ratchet reads it. */
export interface TuningAnswer {
  state?: string;
  updateTime?: string;
  error?: { code?: number; message?: string; status?: string };
  tunedModel?: { model?: string; endpoint?: string };
}

/** A tuning job: its `JobState` read as a batch prediction job's; on success the tuned model (and its endpoint) in the result. */
export function eventFromTuning(name: string, job: TuningAnswer): OperationEvent {
  const state = job.state === undefined ? undefined : JOB_STATES[job.state];
  if (!state) throw new UnknownProviderStateError(String(job.state), `tuning job ${name}: unknown state ${JSON.stringify(job.state)}`);
  const tunedModel = job.tunedModel?.model || job.tunedModel?.endpoint ? job.tunedModel : undefined;
  const result: OperationResult = {
    ...(job.error && { error: errorOf(job.error) }),
    ...(tunedModel && {
      tunedModel: { ...(tunedModel.model && { model: tunedModel.model }), ...(tunedModel.endpoint && { endpoint: tunedModel.endpoint }) },
    }),
  };
  return {
    name,
    kind: 'platform-tuning',
    state,
    providerState: job.state as string,
    ...(job.updateTime !== undefined && { updateTime: normalizeTimeOf(name, job.updateTime) }),
    source: 'poll',
    ...(Object.keys(result).length > 0 && { result }),
  };
}

/** The largest provider object kept whole in a result (a File Search response is a few hundred bytes). */
export const MAX_KEPT_RESPONSE_BYTES = 8 * 1024;

/** A provider object made storable (numbers through storableNumber); undefined when it is none, or larger than kept. */
function storableJson(value: unknown): Record<string, unknown> | undefined {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return undefined;
  const text = JSON.stringify(value, (_key, v) => (typeof v === 'number' ? storableNumber(v) : v));
  if (Buffer.byteLength(text) > MAX_KEPT_RESPONSE_BYTES) return { truncated: true };
  return JSON.parse(text) as Record<string, unknown>;
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

/** One page of Gemini's `batches.list`, as the SDK answers it. */
export interface GeminiBatchLister {
  listBatches(page: { pageSize: number; pageToken?: string; credential?: string }): Promise<{
    batches: Array<BatchAnswer & { name?: string; createTime?: string }>;
    nextPageToken?: string;
  }>;
}

/** Gemini's listing read as the port's: each batch mapped when discovery reads it. */
export function geminiBatches(lister: GeminiBatchLister): Required<Pick<ProviderPoller, 'listBatches'>> {
  return {
    async listBatches(page) {
      const { batches, nextPageToken } = await lister.listBatches(page);
      const listed: ListedBatch[] = batches.map((batch) => ({
        name: batch.name ?? '',
        ...(batch.createTime && { createTime: batch.createTime }),
        event: () => eventFromBatch(batch.name ?? '', 'batch', batch),
      }));
      return { batches: listed, ...(nextPageToken !== undefined && { nextPageToken }) };
    },
  };
}
