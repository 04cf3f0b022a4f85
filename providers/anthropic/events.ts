/**
 * Anthropic's Message Batches -> canonical events. Pure; the SDK call happens
 * in poller.ts. Anthropic pushes nothing: every event is a poll's.
 *
 * A batch has one terminal status, `ended`, whatever became of its requests;
 * the outcome is read from its request counts (issue 58): SUCCEEDED when any
 * request succeeded (the failures are lines of the results file, and the counts
 * say how many), else CANCELLED when every request was canceled, else EXPIRED
 * when every request expired, else FAILED (errored requests, or a mix of
 * errored, canceled and expired ones with none succeeded).
 */
import type { OperationState } from '../../core/lifecycle.ts';
import type { OperationEvent, OperationResult } from '../../core/reducer.ts';
import { countOf, given, newestOf, resultAt, sumOf, textOf, timeOf } from '../answers.ts';
import { UnknownProviderStateError } from '../port.ts';

/** The statuses before the end, as issue 58's table has them; `ended` is read from the counts. */
export const ANTHROPIC_OPEN_STATUSES: Readonly<Record<string, OperationState>> = { in_progress: 'RUNNING', canceling: 'RUNNING' };

/** A Message Batch as `messages.batches.retrieve` answers it, as far as Ratchet reads it (times RFC 3339). */
export interface AnthropicBatchAnswer {
  processing_status?: string | null;
  created_at?: string | null;
  cancel_initiated_at?: string | null;
  ended_at?: string | null;
  request_counts?: {
    processing?: number | null;
    succeeded?: number | null;
    errored?: number | null;
    canceled?: number | null;
    expired?: number | null;
  } | null;
  results_url?: string | null;
}

/** One poll's answer for the batch named `name`. Throws UnknownProviderStateError for a status Ratchet has no mapping for. */
export function eventFromAnthropic(name: string, batch: AnthropicBatchAnswer): OperationEvent {
  const status = batch.processing_status;
  const state =
    status === 'ended'
      ? endedState(batch.request_counts)
      : typeof status === 'string' && Object.hasOwn(ANTHROPIC_OPEN_STATUSES, status)
        ? ANTHROPIC_OPEN_STATUSES[status]
        : undefined;
  if (!state) throw new UnknownProviderStateError(String(status));
  const updateTime = newestOf([timeOf(batch.created_at), timeOf(batch.cancel_initiated_at), timeOf(batch.ended_at)]);
  return {
    name,
    kind: 'anthropic-batch',
    state,
    providerState: status as string,
    ...(updateTime !== undefined && { updateTime }),
    source: 'poll',
    ...resultAt(state, outcomeOf(batch)),
  };
}

function endedState(counts: AnthropicBatchAnswer['request_counts']): OperationState {
  const succeeded = Number(counts?.succeeded ?? 0);
  const errored = Number(counts?.errored ?? 0);
  const canceled = Number(counts?.canceled ?? 0);
  const expired = Number(counts?.expired ?? 0);
  if (succeeded > 0) return 'SUCCEEDED';
  if (canceled > 0 && errored === 0 && expired === 0) return 'CANCELLED';
  if (expired > 0 && errored === 0 && canceled === 0) return 'EXPIRED';
  return 'FAILED';
}

/** The batch's requests by outcome (`errored` as `failed`; `total` their sum) and where its results are. */
function outcomeOf(batch: AnthropicBatchAnswer): OperationResult {
  const counts = batch.request_counts;
  const byOutcome = {
    succeeded: countOf(counts?.succeeded),
    failed: countOf(counts?.errored),
    canceled: countOf(counts?.canceled),
    expired: countOf(counts?.expired),
  };
  const total = counts ? sumOf([countOf(counts.processing ?? 0), ...Object.values(byOutcome)]) : undefined;
  return { requestCounts: given({ total, ...byOutcome }), outputUri: textOf(batch.results_url) };
}

/** The Ratchet name of a Message Batch. */
export function anthropicName(batchId: string): string {
  return `anthropic/messages/batches/${batchId}`;
}
