/**
 * OpenAI's answers -> canonical events. Pure; the SDK call happens in
 * poller.ts. Five kinds of job (batches, background responses, videos,
 * fine-tuning jobs, eval runs) on OpenAI, and batches on Azure OpenAI (the
 * same objects, named `azure-openai/{resource}/batches/{id}`).
 *
 * - The state: each kind's status table (issue 58), the status itself kept in
 *   `providerState`; a status not in the table throws UnknownProviderStateError.
 * - The update time: the newest of the object's `*_at` times that say what
 *   happened to the job (never `expires_at`, a deadline still to come).
 * - The outcome, on a terminal answer only, always as an object (possibly
 *   empty), each field only when OpenAI gave it.
 * - A webhook event carries only the job's id: its terminal state, with the
 *   outcome to come from a poll (`resultPending`).
 */

import type { OperationState } from '../../core/lifecycle.ts';
import { isNameOfKind } from '../../core/names.ts';
import type { OperationEvent, OperationResult } from '../../core/reducer.ts';
import { countOf, given, newestOf, resultAt, sumOf, textOf, timeOfUnixSeconds } from '../answers.ts';
import { MalformedEventError, UnknownProviderStateError } from '../port.ts';

export type OpenAIKind = 'openai-batch' | 'openai-response' | 'openai-video' | 'openai-fine-tuning' | 'openai-eval-run';
/** Azure OpenAI's batches are OpenAI's batch objects. */
export type OpenAIObjectKind = OpenAIKind | 'azure-openai-batch';

/** Each kind's statuses, as issue 58's table has them. */
export const OPENAI_STATUSES: Readonly<Record<OpenAIObjectKind, Readonly<Record<string, OperationState>>>> = {
  'openai-batch': {
    validating: 'PENDING',
    in_progress: 'RUNNING',
    finalizing: 'RUNNING',
    cancelling: 'RUNNING',
    completed: 'SUCCEEDED',
    failed: 'FAILED',
    expired: 'EXPIRED',
    cancelled: 'CANCELLED',
  },
  // `incomplete`: the response stopped before its output was whole (a token limit, a content filter). A receiver
  // that publishes or bills must not take it for a success: FAILED, the reason in `result.error`.
  'openai-response': {
    queued: 'PENDING',
    in_progress: 'RUNNING',
    completed: 'SUCCEEDED',
    failed: 'FAILED',
    incomplete: 'FAILED',
    cancelled: 'CANCELLED',
  },
  'openai-video': { queued: 'PENDING', in_progress: 'RUNNING', completed: 'SUCCEEDED', failed: 'FAILED' },
  'openai-fine-tuning': {
    validating_files: 'PENDING',
    queued: 'PENDING',
    running: 'RUNNING',
    succeeded: 'SUCCEEDED',
    failed: 'FAILED',
    cancelled: 'CANCELLED',
  },
  // Evals spell it `canceled`.
  'openai-eval-run': { queued: 'PENDING', in_progress: 'RUNNING', completed: 'SUCCEEDED', failed: 'FAILED', canceled: 'CANCELLED' },
  'azure-openai-batch': {
    validating: 'PENDING',
    in_progress: 'RUNNING',
    finalizing: 'RUNNING',
    cancelling: 'RUNNING',
    completed: 'SUCCEEDED',
    failed: 'FAILED',
    expired: 'EXPIRED',
    cancelled: 'CANCELLED',
  },
};

/** The times that say what happened to a job, in unix seconds (`expires_at` and `estimated_finish` are deadlines, not events). */
const EVENT_TIMES = [
  'created_at',
  'in_progress_at',
  'finalizing_at',
  'completed_at',
  'failed_at',
  'expired_at',
  'cancelling_at',
  'cancelled_at',
  'finished_at',
] as const;

type Seconds = number | null;

interface Usage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  total_tokens?: number | null;
  input_tokens_details?: { cached_tokens?: number | null } | null;
  output_tokens_details?: { reasoning_tokens?: number | null } | null;
}

interface ApiError {
  code?: string | null;
  message?: string | null;
}

/** What Ratchet reads of any of the five objects (each kind has some of these fields; the SDK's types fit it). */
export interface OpenAIJobAnswer {
  status?: string | null;
  created_at?: Seconds;
  in_progress_at?: Seconds;
  finalizing_at?: Seconds;
  completed_at?: Seconds;
  failed_at?: Seconds;
  expired_at?: Seconds;
  cancelling_at?: Seconds;
  cancelled_at?: Seconds;
  finished_at?: Seconds;
  /** Batches. */
  request_counts?: { total?: number | null; completed?: number | null; failed?: number | null } | null;
  output_file_id?: string | null;
  error_file_id?: string | null;
  errors?: { data?: Array<ApiError & { line?: number | null }> | null } | null;
  /** Batches and responses. */
  usage?: Usage | null;
  /** Responses, videos, fine-tuning jobs and eval runs. */
  error?: ApiError | null;
  /** Responses. */
  incomplete_details?: { reason?: string | null } | null;
  /** Fine-tuning jobs. */
  fine_tuned_model?: string | null;
  result_files?: string[] | null;
  /** Eval runs. */
  result_counts?: { total?: number | null; passed?: number | null; failed?: number | null; errored?: number | null } | null;
  per_model_usage?: Array<{
    prompt_tokens?: number | null;
    completion_tokens?: number | null;
    total_tokens?: number | null;
    cached_tokens?: number | null;
  }> | null;
  report_url?: string | null;
}

/** One poll's answer for a job of `kind` named `name`. Throws UnknownProviderStateError for a status not in the table. */
export function eventFromOpenAI(kind: OpenAIObjectKind, name: string, answer: OpenAIJobAnswer): OperationEvent {
  const status = answer.status;
  const state = typeof status === 'string' && Object.hasOwn(OPENAI_STATUSES[kind], status) ? OPENAI_STATUSES[kind][status] : undefined;
  if (!state) throw new UnknownProviderStateError(String(status));
  const updateTime = newestOf(EVENT_TIMES.map((field) => timeOfUnixSeconds(answer[field])));
  return {
    name,
    kind,
    state,
    providerState: status as string,
    ...(updateTime !== undefined && { updateTime }),
    source: 'poll',
    ...resultAt(state, outcomeOf(kind, status as string, answer)),
  };
}

/** Every field of the outcome OpenAI gave, for its kind. */
function outcomeOf(kind: OpenAIObjectKind, status: string, answer: OpenAIJobAnswer): OperationResult {
  switch (kind) {
    case 'openai-batch':
    case 'azure-openai-batch':
      return {
        requestCounts: given({
          total: countOf(answer.request_counts?.total),
          succeeded: countOf(answer.request_counts?.completed),
          failed: countOf(answer.request_counts?.failed),
        }),
        usage: usageOf(answer.usage),
        outputFileId: textOf(answer.output_file_id),
        errorFileId: textOf(answer.error_file_id),
        error: errorOf(answer.errors?.data?.[0]),
      };
    case 'openai-response':
      return { usage: usageOf(answer.usage), error: status === 'incomplete' ? incompleteOf(answer) : errorOf(answer.error) };
    case 'openai-video':
      return { error: errorOf(answer.error) };
    case 'openai-fine-tuning':
      return {
        fineTunedModel: textOf(answer.fine_tuned_model),
        // The job's result file: its training metrics.
        outputFileId: textOf(answer.result_files?.[0]),
        error: errorOf(answer.error),
      };
    case 'openai-eval-run':
      return {
        requestCounts: evalCountsOf(answer.result_counts),
        usage: evalUsageOf(answer.per_model_usage),
        // The run's report on the dashboard: where its outcome is read.
        outputUri: textOf(answer.report_url),
        error: errorOf(answer.error),
      };
  }
}

/** `{code, message}` as OpenAI gave them; none when it gave neither. */
function errorOf(error: ApiError | null | undefined): OperationResult['error'] {
  return given({ code: textOf(error?.code), message: textOf(error?.message) });
}

/** An incomplete response's reason (`max_output_tokens`, `content_filter`) as the error's code. */
function incompleteOf(answer: OpenAIJobAnswer): OperationResult['error'] {
  const reason = textOf(answer.incomplete_details?.reason);
  return {
    ...(reason && { code: reason }),
    message: `the response ended before its output was complete${reason ? ` (${reason})` : ''}`,
  };
}

/** Tokens under the result's names: cached input tokens as `cachedTokens`, reasoning tokens as `thoughtTokens`. */
function usageOf(usage: Usage | null | undefined): OperationResult['usage'] {
  return given({
    inputTokens: countOf(usage?.input_tokens),
    outputTokens: countOf(usage?.output_tokens),
    totalTokens: countOf(usage?.total_tokens),
    cachedTokens: countOf(usage?.input_tokens_details?.cached_tokens),
    thoughtTokens: countOf(usage?.output_tokens_details?.reasoning_tokens),
  });
}

/**
 * An eval run's items by outcome: `passed` as `succeeded`; `failed` (graded and failed) and `errored` (could not be
 * graded) both as `failed`, so that `total` is `succeeded + failed` as for a batch. Neither kept apart: the run's
 * report has the detail. `failed` only when both are given, so a missing one never passes for a zero.
 */
function evalCountsOf(counts: OpenAIJobAnswer['result_counts']): OperationResult['requestCounts'] {
  return given({
    total: countOf(counts?.total),
    succeeded: countOf(counts?.passed),
    failed: sumOf([countOf(counts?.failed), countOf(counts?.errored)]),
  });
}

/** An eval run's tokens, summed over the models it used (a field only when every model gave it). */
function evalUsageOf(perModel: OpenAIJobAnswer['per_model_usage']): OperationResult['usage'] {
  if (!perModel || perModel.length === 0) return undefined;
  const total = (field: 'prompt_tokens' | 'completion_tokens' | 'total_tokens' | 'cached_tokens') =>
    sumOf(perModel.map((usage) => countOf(usage?.[field])));
  return given({
    inputTokens: total('prompt_tokens'),
    outputTokens: total('completion_tokens'),
    totalTokens: total('total_tokens'),
    cachedTokens: total('cached_tokens'),
  });
}

/** The Ratchet name of an OpenAI job by its kind and ids. */
export function openAIName(kind: OpenAIKind, id: string, evalId?: string): string {
  switch (kind) {
    case 'openai-batch':
      return `openai/batches/${id}`;
    case 'openai-response':
      return `openai/responses/${id}`;
    case 'openai-video':
      return `openai/videos/${id}`;
    case 'openai-fine-tuning':
      return `openai/fine_tuning/jobs/${id}`;
    case 'openai-eval-run':
      return `openai/evals/${evalId}/runs/${id}`;
  }
}

/** The ids in a (well-formed) name: the job's, and an eval run's eval. */
export function idsOfOpenAIName(name: string): { id: string; evalId?: string } {
  const parts = name.split('/');
  const id = parts.at(-1) as string;
  return parts[1] === 'evals' ? { id, evalId: parts[2] as string } : { id };
}

/** OpenAI's webhook event types, each with its kind and the state it announces. */
export const OPENAI_WEBHOOK_TYPES: Readonly<Record<string, { kind: OpenAIKind; state: OperationState }>> = {
  'batch.completed': { kind: 'openai-batch', state: 'SUCCEEDED' },
  'batch.failed': { kind: 'openai-batch', state: 'FAILED' },
  'batch.expired': { kind: 'openai-batch', state: 'EXPIRED' },
  'batch.cancelled': { kind: 'openai-batch', state: 'CANCELLED' },
  'response.completed': { kind: 'openai-response', state: 'SUCCEEDED' },
  'response.failed': { kind: 'openai-response', state: 'FAILED' },
  'response.incomplete': { kind: 'openai-response', state: 'FAILED' },
  'response.cancelled': { kind: 'openai-response', state: 'CANCELLED' },
  // Sent by OpenAI, missing from the SDK's webhook types.
  'video.completed': { kind: 'openai-video', state: 'SUCCEEDED' },
  'video.failed': { kind: 'openai-video', state: 'FAILED' },
  'fine_tuning.job.succeeded': { kind: 'openai-fine-tuning', state: 'SUCCEEDED' },
  'fine_tuning.job.failed': { kind: 'openai-fine-tuning', state: 'FAILED' },
  'fine_tuning.job.cancelled': { kind: 'openai-fine-tuning', state: 'CANCELLED' },
  'eval.run.succeeded': { kind: 'openai-eval-run', state: 'SUCCEEDED' },
  'eval.run.failed': { kind: 'openai-eval-run', state: 'FAILED' },
  'eval.run.canceled': { kind: 'openai-eval-run', state: 'CANCELLED' },
};

/** A webhook event as OpenAI sends it (the body, its signature already checked). */
export interface OpenAIWebhookEvent {
  id?: unknown;
  type?: unknown;
  created_at?: unknown;
  data?: { id?: unknown } | null;
}

/**
 * What a webhook event says: the job's event, or for an eval run (whose event carries the run's id alone, not its
 * eval's) the run's id and the event the route completes with the tracked run's name.
 */
export type OpenAIWebhookMapping =
  | { kind: Exclude<OpenAIKind, 'openai-eval-run'> | 'azure-openai-batch'; event: OperationEvent }
  | { kind: 'openai-eval-run'; runId: string; event: Omit<OperationEvent, 'name'> };

/**
 * An OpenAI webhook event, or undefined for a type Ratchet does not map (`realtime.call.incoming`, types to come).
 * `azureResource`: the event came from that Azure OpenAI resource, where only batches are jobs Ratchet tracks.
 * A mapped type without its id or time throws MalformedEventError.
 */
export function eventFromOpenAIWebhook(body: OpenAIWebhookEvent, azureResource?: string): OpenAIWebhookMapping | undefined {
  const type =
    typeof body.type === 'string' && Object.hasOwn(OPENAI_WEBHOOK_TYPES, body.type) ? OPENAI_WEBHOOK_TYPES[body.type] : undefined;
  if (!type || (azureResource !== undefined && type.kind !== 'openai-batch')) return undefined;
  const id = textOf(body.data?.id);
  const updateTime = timeOfUnixSeconds(body.created_at);
  if (id === undefined || updateTime === undefined)
    throw new MalformedEventError(`invalid ${String(body.type)} event: ${id === undefined ? 'no data.id' : 'no created_at'}`);
  const event = {
    kind: type.kind,
    state: type.state,
    providerState: body.type as string,
    updateTime,
    source: 'webhook' as const,
    ...(typeof body.id === 'string' && { eventId: body.id }),
    // OpenAI's events carry the id alone: a poll brings the outcome.
    resultPending: true as const,
  };
  if (type.kind === 'openai-eval-run') {
    if (!isNameOfKind(`openai/evals/e/runs/${id}`, 'openai-eval-run'))
      throw new MalformedEventError(`invalid ${String(body.type)} event: not an eval run id`);
    return { kind: 'openai-eval-run', runId: id, event: { ...event, kind: 'openai-eval-run' } };
  }
  const kind = azureResource === undefined ? type.kind : 'azure-openai-batch';
  const name = azureResource === undefined ? openAIName(type.kind, id) : azureOpenAIName(azureResource, id);
  if (!isNameOfKind(name, kind)) throw new MalformedEventError(`invalid ${String(body.type)} event: not a ${kind} id`);
  return { kind, event: { ...event, kind, name } };
}

/** The Ratchet name of a batch on an Azure OpenAI resource. */
export function azureOpenAIName(resource: string, batchId: string): string {
  return `azure-openai/${resource}/batches/${batchId}`;
}

/** The resource and batch id in a (well-formed) Azure OpenAI batch name. */
export function idsOfAzureOpenAIName(name: string): { resource: string; id: string } {
  const [, resource, , id] = name.split('/');
  return { resource: resource as string, id: id as string };
}
