/**
 * Amazon Bedrock batch inference jobs (model invocation jobs) -> canonical
 * events. Pure; the SDK call happens in poller.ts.
 *
 * A job is named `bedrock/{region}/{account}/model-invocation-jobs/{jobId}`:
 * its ARN, `arn:{partition}:bedrock:{region}:{account}:model-invocation-job/{jobId}`,
 * is rebuilt from the name for the poll. Bedrock pushes an EventBridge event
 * per transition ("Batch Inference Job State Change", best effort and
 * unordered): it carries no time of the change, so it is a nudge whose state
 * applies only where it ranks higher, and the poll's `lastModifiedTime` decides
 * the rest; a terminal one waits for a poll to bring the outcome.
 */

import { isTerminal, type OperationState } from '../../core/lifecycle.ts';
import { isNameOfKind } from '../../core/names.ts';
import type { OperationEvent, OperationResult } from '../../core/reducer.ts';
import { countOf, given, resultAt, textOf, timeOf } from '../answers.ts';
import { MalformedEventError, UnknownProviderStateError } from '../port.ts';

/** Bedrock's statuses, as issue 58's table has them (a job `PartiallyCompleted` wrote its output, some records failed). */
export const BEDROCK_STATUSES: Readonly<Record<string, OperationState>> = {
  Submitted: 'PENDING',
  Validating: 'PENDING',
  Scheduled: 'PENDING',
  InProgress: 'RUNNING',
  Stopping: 'RUNNING',
  Completed: 'SUCCEEDED',
  PartiallyCompleted: 'SUCCEEDED',
  Failed: 'FAILED',
  Stopped: 'CANCELLED',
  Expired: 'EXPIRED',
};

/** A job as `GetModelInvocationJob` answers it, as far as Ratchet reads it (the SDK makes Dates of the times). */
export interface BedrockJobAnswer {
  status?: string | null;
  message?: string | null;
  lastModifiedTime?: Date | string | null;
  outputDataConfig?: { s3OutputDataConfig?: { s3Uri?: string | null } | null } | null;
  totalRecordCount?: number | null;
  successRecordCount?: number | null;
  errorRecordCount?: number | null;
}

/** One poll's answer for the job named `name`. Throws UnknownProviderStateError for a status not in the table. */
export function eventFromBedrock(name: string, job: BedrockJobAnswer): OperationEvent {
  const state = stateOf(job.status);
  const updateTime = timeOf(job.lastModifiedTime);
  return {
    name,
    kind: 'bedrock-batch',
    state,
    providerState: job.status as string,
    ...(updateTime !== undefined && { updateTime }),
    source: 'poll',
    ...resultAt(state, outcomeOf(state, job)),
  };
}

function stateOf(status: unknown): OperationState {
  const state = typeof status === 'string' && Object.hasOwn(BEDROCK_STATUSES, status) ? BEDROCK_STATUSES[status] : undefined;
  if (!state) throw new UnknownProviderStateError(String(status));
  return state;
}

/** Where the output was written, the records by outcome, and on failure Bedrock's message. */
function outcomeOf(state: OperationState, job: BedrockJobAnswer): OperationResult {
  const message = textOf(job.message);
  return {
    outputUri: textOf(job.outputDataConfig?.s3OutputDataConfig?.s3Uri),
    requestCounts: given({
      total: countOf(job.totalRecordCount),
      succeeded: countOf(job.successRecordCount),
      failed: countOf(job.errorRecordCount),
    }),
    error: state === 'FAILED' && message ? { message } : undefined,
  };
}

/** The `detail` of a "Batch Inference Job State Change" event, as far as Ratchet reads it. */
export interface BedrockStateChangeDetail {
  batchJobArn?: unknown;
  batchJobName?: unknown;
  status?: unknown;
}

/**
 * An EventBridge "Batch Inference Job State Change" event's detail (`eventId`: the event's `id`). No update time: it
 * carries none. Throws UnknownProviderStateError for a status not in the table, MalformedEventError (the
 * webhooks' own) for a detail without a job ARN Ratchet can name.
 */
export function eventFromBedrockEvent(detail: BedrockStateChangeDetail, eventId?: string): OperationEvent {
  const arn = textOf(detail.batchJobArn);
  const name = arn === undefined ? undefined : bedrockNameOfArn(arn);
  if (name === undefined) throw new MalformedEventError(`not a batch inference job's ARN: ${JSON.stringify(String(arn).slice(0, 200))}`);
  const state = stateOf(detail.status);
  return {
    name,
    kind: 'bedrock-batch',
    state,
    providerState: detail.status as string,
    source: 'webhook',
    ...(eventId !== undefined && { eventId }),
    // The event has no outcome of its own: a poll brings it (where the output is, the record counts).
    ...(isTerminal(state) && { resultPending: true as const }),
  };
}

const ARN = /^arn:(aws(?:-[a-z]+)*):bedrock:([^:]+):([^:]+):model-invocation-job\/([^/]+)$/;

/** The Ratchet name of the job with this ARN; undefined when it is no job ARN or makes no well-formed name. */
export function bedrockNameOfArn(arn: string): string | undefined {
  const match = ARN.exec(arn);
  if (!match) return undefined;
  const [, , region, account, id] = match;
  const name = `bedrock/${region}/${account}/model-invocation-jobs/${id}`;
  return isNameOfKind(name, 'bedrock-batch') ? name : undefined;
}

/** The region, account and id in a (well-formed) name, and the job's ARN (its partition by the region). */
export function bedrockJobOfName(name: string): { region: string; account: string; id: string; arn: string } {
  const [, region, account, , id] = name.split('/') as [string, string, string, string, string];
  return { region, account, id, arn: `arn:${partitionOf(region)}:bedrock:${region}:${account}:model-invocation-job/${id}` };
}

/** The AWS partition a region is in. */
function partitionOf(region: string): string {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  if (region.startsWith('us-iso-')) return 'aws-iso';
  if (region.startsWith('us-isob-')) return 'aws-iso-b';
  return 'aws';
}
