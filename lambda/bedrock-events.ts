/**
 * Bedrock's "Batch Inference Job State Change" events, as EventBridge hands
 * them to a function from the default bus, into the one ingest. Bedrock sends
 * one per transition, best effort and unordered, with no time of the change:
 * each is a nudge (providers/bedrock/events.ts) whose state applies only where
 * it ranks higher, a terminal one waiting for the poll that brings the
 * outcome; the poll's `lastModifiedTime` decides the rest.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { EventBridgeEvent } from 'aws-lambda';
import { ingest, NotRecordedError } from '../app/ingest.ts';
import type { OperationStore, PollRequests, UnprocessableLog } from '../app/ports.ts';
import { StoreRejectedError } from '../app/ports.ts';
import type { Telemetry, WebhookOutcome } from '../app/telemetry.ts';
import { timeFromDate } from '../core/time.ts';
import { type BedrockStateChangeDetail, eventFromBedrockEvent } from '../providers/bedrock/events.ts';
import { MalformedEventError, UnknownProviderStateError } from '../providers/port.ts';
import { BEDROCK_EVENT_DETAIL_TYPE, BEDROCK_EVENT_SOURCE } from './bedrock-settings.ts';

export type BedrockJobEvent = EventBridgeEvent<typeof BEDROCK_EVENT_DETAIL_TYPE, BedrockStateChangeDetail>;

export interface BedrockEventsDeps {
  store: OperationStore & PollRequests;
  unprocessable?: UnprocessableLog;
  logger: Pick<Logger, 'info' | 'warn' | 'error'>;
  telemetry?: Telemetry;
  clock?: () => Date;
}

/**
 * Applies one event. What can never be used (no job ARN, an event of another
 * kind) is logged and kept as unprocessable, and a status Ratchet cannot map
 * yet is ignored (the poll keeps the job's raw status): neither is worth a
 * retry. Throws NotRecordedError while the table cannot take the write, so
 * Lambda's asynchronous retries bring the event again.
 */
export async function ingestBedrockEvent(event: BedrockJobEvent, deps: BedrockEventsDeps): Promise<WebhookOutcome> {
  const started = performance.now();
  const outcome = await judge(event, deps);
  deps.telemetry?.webhook(outcome, (performance.now() - started) / 1000);
  return outcome;
}

async function judge(event: BedrockJobEvent, deps: BedrockEventsDeps): Promise<WebhookOutcome> {
  const { store, logger, clock = () => new Date() } = deps;
  const log = { eventId: event.id, job: String(event.detail?.batchJobArn ?? '') };
  if (event.source !== BEDROCK_EVENT_SOURCE || event['detail-type'] !== BEDROCK_EVENT_DETAIL_TYPE)
    return unusable(event, deps, `not a ${BEDROCK_EVENT_DETAIL_TYPE} event from ${BEDROCK_EVENT_SOURCE}`);
  let mapped: ReturnType<typeof eventFromBedrockEvent>;
  try {
    mapped = eventFromBedrockEvent(event.detail ?? {}, event.id);
  } catch (error) {
    if (error instanceof UnknownProviderStateError) {
      logger.warn('Bedrock event ignored: a status Ratchet has no mapping for (the poll keeps it raw)', { ...log, status: error.raw });
      return { decision: 'ignored', reason: 'unknown-state' };
    }
    if (error instanceof MalformedEventError) return unusable(event, deps, error.message);
    throw error;
  }
  try {
    const result = await ingest(mapped, { store, clock });
    const at = { ...log, operation: mapped.name, eventState: mapped.state, version: result.record.version };
    if (result.outcome === 'applied') {
      logger.info('Bedrock event applied', { ...at, state: result.record.state, stateChanged: result.stateChanged });
      // Ended, its outcome to come: due now, so the schedule's next run (within a minute) polls it rather than the
      // job's own next poll, up to half an hour on. Best effort: the job is polled on its schedule all the same.
      if (result.record.resultPending)
        await store
          .pollNow(mapped.name, timeFromDate(clock()))
          .catch((error: Error) =>
            logger.warn('poll for the outcome not asked; the job is polled on its schedule', { ...at, detail: error.message }),
          );
      return { decision: 'applied', reason: '' };
    }
    logger[result.reason === 'terminal-conflict' ? 'warn' : 'info']('Bedrock event discarded', { ...at, reason: result.reason });
    return { decision: 'discarded', reason: result.reason };
  } catch (error) {
    if (error instanceof StoreRejectedError) return unusable(event, deps, error.message, 'unstorable');
    if (error instanceof NotRecordedError) {
      logger.error('Bedrock event not recorded: Lambda retries it', { ...log, reason: error.reason, error: error.cause });
      deps.telemetry?.webhook({ decision: 'not-recorded', reason: error.reason }, 0);
    }
    throw error;
  }
}

/** Kept for the operator (`GET /decisions`), once per event id; a retry cannot make it usable. */
async function unusable(
  event: BedrockJobEvent,
  deps: BedrockEventsDeps,
  detail: string,
  reason: 'malformed-event' | 'unstorable' = 'malformed-event',
): Promise<WebhookOutcome> {
  deps.logger.error('Bedrock event unprocessable: kept in the decisions log', { eventId: event.id, reason, detail });
  await deps.unprocessable?.recordUnprocessable({
    outcome: 'unprocessable',
    receivedAt: timeFromDate((deps.clock ?? (() => new Date()))()),
    webhookId: String(event.id),
    type: String(event['detail-type'] ?? '').slice(0, 100) || null,
    reason,
    detail: detail.slice(0, 1_000),
    scheme: 'eventbridge',
    body: Buffer.from(JSON.stringify(event)).subarray(0, 4_096).toString('utf8'),
  });
  return { decision: 'unprocessable', reason };
}
