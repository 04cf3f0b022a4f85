/**
 * The one place that decides whether an event moves an operation forward.
 * Pure: no I/O, no clock (the caller passes `now`).
 */
import { isTerminal, type OperationKind, type OperationState, type ProviderName, providerOf, rankOf } from './lifecycle.ts';

/** What wrote a version: a delivery, a poll, a track, or reconcile marking the job overdue (core/overdue.ts). */
export type EventSource = 'webhook' | 'poll' | 'track' | 'overdue';

export interface OperationResult {
  /** Where the output lives: a batch's output file, a generated video. */
  outputUri?: string;
  /** The provider's error: a gRPC/HTTP code (its literal text when not an exact storable number), message, status. */
  error?: { code?: string | number; message?: string; status?: string };
  /** Veo: videos the safety filters blocked (a video answer with none left is FAILED). */
  filtered?: { count: number; reasons: string[] };
  /**
   * What a batch cost, in requests: the Gemini API's `batchStats` under its own names (an Agent Platform job's
   * `completionStats` read into the same fields). A count past 2^53 is kept as its text.
   */
  batchStats?: {
    requestCount?: number | string;
    successfulRequestCount?: number | string;
    failedRequestCount?: number | string;
    pendingRequestCount?: number | string;
  };
  /** What an interaction cost, in tokens (Gemini's `usage.total_input_tokens` as `inputTokens`, and so on). */
  usage?: {
    inputTokens?: number | string;
    outputTokens?: number | string;
    totalTokens?: number | string;
    cachedTokens?: number | string;
    thoughtTokens?: number | string;
    toolUseTokens?: number | string;
  };
  /** A File Search import or upload: the operation's `response` (the document it made), as Gemini answered it. */
  response?: Record<string, unknown>;
  /** An Agent Platform tuning job that succeeded: the tuned model's resource name, and its endpoint. */
  tunedModel?: { model?: string; endpoint?: string };
  /**
   * A batch's requests by outcome, in one shape for OpenAI's (`completed` as `succeeded`), Anthropic's (`errored` as
   * `failed`) and Bedrock's counts: `canceled` and `expired` where the provider counts them.
   */
  requestCounts?: {
    total?: number | string;
    succeeded?: number | string;
    failed?: number | string;
    canceled?: number | string;
    expired?: number | string;
  };
  /** OpenAI: the batch's output and error files. */
  outputFileId?: string;
  errorFileId?: string;
  /** An OpenAI fine-tuning job that succeeded: the model it made. */
  fineTunedModel?: string;
}

/** One observation of an operation's state, already normalised at the edge. */
export interface OperationEvent {
  name: string;
  kind: OperationKind;
  state: OperationState;
  /** The provider's own word for the state, e.g. `JOB_STATE_SUCCEEDED` or `batch.succeeded`. */
  providerState: string;
  /** Normalised (see time.ts); absent when the source carries no time (video polls). */
  updateTime?: string;
  source: Exclude<EventSource, 'track' | 'overdue'>;
  /** Webhook delivery id, or a poll's own id; for tracing only. */
  eventId?: string;
  result?: OperationResult;
  /** Dynamic webhooks: the job's own `user_metadata`, for receivers to route by. */
  userMetadata?: Record<string, unknown>;
  /** How a webhook delivery was signed (`hmac`, `ed25519`): for the decisions log only, never compared. */
  scheme?: string;
  /**
   * A terminal state seen without its outcome (OpenAI's webhooks carry only the job's id): the record waits for a
   * poll to give the outcome, which is then a write of its own (`resultWrite`).
   */
  resultPending?: true;
}

/** The stored record of an operation. `version` counts applied writes. */
export interface OperationRecord {
  name: string;
  kind: OperationKind;
  /** Who runs the job (`gemini`, `openai`, `anthropic`, `bedrock`, `azure-openai`): its kind's provider. */
  provider: ProviderName;
  /** null while the operation is tracked but nothing about it was observed yet. */
  state: OperationState | null;
  providerState: string | null;
  updateTime: string | null;
  version: number;
  /** The state before the write that produced this version. */
  previousState: OperationState | null;
  /** Whether the write that produced this version changed `state` (drives side effects). */
  stateChanged: boolean;
  source: EventSource;
  eventId: string | null;
  result: OperationResult | null;
  /** The job's `user_metadata` from a dynamic webhook, kept once seen. */
  userMetadata?: Record<string, unknown> | null;
  /** The label of the Gemini API key the job is polled with (GEMINI_API_KEYS), set when it was tracked or adopted; never the key. */
  credential?: string;
  /** Set once the job was found open past its kind's limit (OVERDUE_AFTER): when, and the limit; kept after it ends. */
  overdue?: { at: string; afterSeconds: number };
  /** Terminal, its outcome not known yet: polled until the provider gives it. */
  resultPending?: true;
  /** This version is the outcome of a terminal job, written after its state (`writeKind: result`, effect `operation.result`). */
  resultWrite?: true;
  createdAt: string;
  recordedAt: string;
}

export type DiscardReason = 'duplicate' | 'regress-from-terminal' | 'lower-rank' | 'stale-or-equal-update-time' | 'terminal-conflict';

export type Decision = { applied: true; next: OperationRecord; stateChanged: boolean } | { applied: false; reason: DiscardReason };

export function applyEvent(current: OperationRecord | undefined, event: OperationEvent, now: string): Decision {
  const reason = discardReason(current, event);
  if (reason) return { applied: false, reason };
  const stateChanged = current?.state !== event.state;
  const resultWrite = !stateChanged && isResultFor(current, event);
  const resultPending = isTerminal(event.state) && !resultWrite && (event.resultPending ? !knowsResult(current, event) : false);
  const next: OperationRecord = {
    name: event.name,
    kind: event.kind,
    provider: providerOf(event.kind),
    state: event.state,
    providerState: event.providerState,
    // A result write may come from a poll older than the webhook that ended the job: the time never goes back.
    updateTime: (resultWrite && !isLater(event.updateTime, current?.updateTime) ? current?.updateTime : event.updateTime) ?? null,
    version: (current?.version ?? 0) + 1,
    previousState: current?.state ?? null,
    stateChanged,
    source: event.source,
    eventId: event.eventId ?? null,
    result: event.result ?? current?.result ?? null,
    ...((event.userMetadata ?? current?.userMetadata) && { userMetadata: event.userMetadata ?? current?.userMetadata }),
    ...(current?.credential && { credential: current.credential }),
    ...(current?.overdue && { overdue: current.overdue }),
    ...(resultPending && { resultPending: true }),
    ...(resultWrite && { resultWrite: true }),
    createdAt: current?.createdAt ?? now,
    recordedAt: now,
  };
  return { applied: true, next, stateChanged };
}

/** The outcome a terminal record waits for: the same terminal state, with a result, from a source that has it. */
function isResultFor(current: OperationRecord | undefined, event: OperationEvent): boolean {
  return current?.resultPending === true && event.state === current.state && event.result !== undefined && !event.resultPending;
}

/** A bare terminal event over a record that already holds this state's outcome (a poll saw the end first). */
function knowsResult(current: OperationRecord | undefined, event: OperationEvent): boolean {
  return current?.state === event.state && current.result !== null && !current.resultPending;
}

/** Whether reconcile polls the job: open, or terminal with its outcome still to come. */
export function isPolled(record: Pick<OperationRecord, 'state' | 'resultPending'>): boolean {
  return !isTerminal(record.state) || record.resultPending === true;
}

function discardReason(current: OperationRecord | undefined, event: OperationEvent): DiscardReason | undefined {
  if (!current || current.state === null) return undefined;
  // A redelivery of the webhook that produced the stored state (Gemini keeps webhook-id across retries).
  if (event.eventId !== undefined && event.eventId === current.eventId) return 'duplicate';
  const from = rankOf(current.state);
  const to = rankOf(event.state);
  if (isTerminal(current.state)) {
    if (to < from) return 'regress-from-terminal';
    // Terminal is absorbing: the first terminal stored stays, a different one is an anomaly.
    if (event.state !== current.state) return 'terminal-conflict';
    // The outcome it waits for applies whatever its time (a poll may be older than the webhook that ended it).
    if (isResultFor(current, event)) return undefined;
  } else {
    if (to < from) return 'lower-rank';
    if (to > from) return undefined;
  }
  // Same rank: fencing on time. An event without a time never overrides a same-rank state.
  return isLater(event.updateTime, current.updateTime) ? undefined : 'stale-or-equal-update-time';
}

/** Normalised times compare as strings; a missing time is earlier than any time. */
function isLater(candidate: string | null | undefined, stored: string | null | undefined): boolean {
  return candidate != null && (stored == null || candidate > stored);
}

/** The record `POST /operations` creates: known, polled, but with no observed state yet. */
export function trackedRecord(
  name: string,
  kind: OperationKind,
  now: string,
  userMetadata?: Record<string, unknown>,
  credential?: string,
): OperationRecord {
  return {
    name,
    kind,
    provider: providerOf(kind),
    state: null,
    providerState: null,
    updateTime: null,
    version: 1,
    previousState: null,
    stateChanged: false,
    source: 'track',
    eventId: null,
    result: null,
    createdAt: now,
    recordedAt: now,
    ...(userMetadata && { userMetadata }),
    ...(credential && { credential }),
  };
}

/** A record as a store reads it back: one written before records carried `provider` gets its kind's. */
export function storedRecord<T extends Omit<OperationRecord, 'provider'> & { provider?: ProviderName }>(raw: T): T & OperationRecord {
  return raw.provider ? (raw as T & OperationRecord) : { ...raw, provider: providerOf(raw.kind) };
}
