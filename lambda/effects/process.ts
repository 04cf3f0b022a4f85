/**
 * The effects handler: a batch from the per-operation effects queue (SQS FIFO
 * in AWS, its local emulation otherwise), each message one applied state
 * change (its stream record as the body), delivered to every sink once.
 *
 * Message groups (operations) are handled side by side; within a group, in
 * order, and the first failure fails the rest of that group's messages in the
 * batch, so a later version never overtakes an earlier one. A failed attempt
 * is retried by the queue after a backoff (the message's visibility), for
 * EFFECTS_RETRY_FOR_SECONDS from its first attempt; then, or at once on 410
 * Gone, it becomes a whole dead letter and later versions of that operation
 * are parked behind it until it is re-driven. A message that cannot be
 * decoded is dead-lettered at once, raw, and holds up nothing.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { DynamoDBRecord, SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { DeadLetterReason, DeadLetters } from './dead-letters.ts';
import type { EffectLedger } from './ledger.ts';
import { LAST_ERROR_ATTRIBUTE, nextAttempt, REDRIVEN_ATTRIBUTE, type RetryScheduler, type RetrySettings } from './queue.ts';
import { type EffectSink, SinkError } from './sinks.ts';
import { InvalidStreamRecordError, idempotencyKey, stateChangedEvent, type Transition, transitionFromRecord } from './transition.ts';

export interface EffectsDeps {
  sinks: EffectSink[];
  ledger: EffectLedger;
  deadLetters: DeadLetters;
  queue: RetryScheduler;
  retry: RetrySettings;
  logger: Logger;
  metrics?: Metrics;
  clock?: () => Date;
}

export type EffectsHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

export function createEffectsHandler(deps: EffectsDeps): EffectsHandler {
  return async (event) => {
    const groups = new Map<string, SQSRecord[]>();
    for (const message of event.Records) {
      const group = message.attributes.MessageGroupId ?? message.messageId;
      groups.set(group, [...(groups.get(group) ?? []), message]);
    }
    const failures: SQSBatchItemFailure[] = [];
    await Promise.all(
      [...groups.values()].map(async (messages) => {
        for (const [i, message] of messages.entries()) {
          if (await handleMessage(message, deps)) continue;
          failures.push(...messages.slice(i).map((m) => ({ itemIdentifier: m.messageId })));
          // The rest of the group goes back at once: the failed message, invisible for its backoff, holds the FIFO
          // group, and they follow it. Left at the queue's visibility timeout, they would hold the group 6 minutes.
          await Promise.all(messages.slice(i + 1).map((m) => deps.queue.retryAfter(m, 0)));
          return;
        }
      }),
    );
    return { batchItemFailures: failures };
  };
}

/** True when the message is done with (delivered, parked or dead-lettered); false to retry it later. */
async function handleMessage(message: SQSRecord, deps: EffectsDeps): Promise<boolean> {
  const { sinks, ledger, deadLetters, logger, clock = () => new Date() } = deps;
  const count = (metric: string) => {
    deps.metrics?.addMetric(metric, MetricUnit.Count, 1);
    deps.metrics?.publishStoredMetrics();
  };
  let record: DynamoDBRecord | undefined;
  let transition: Transition;
  try {
    record = JSON.parse(message.body) as DynamoDBRecord;
    transition = transitionFromRecord(record);
  } catch (error) {
    const reason =
      error instanceof InvalidStreamRecordError ? error.message : `message body is not a stream record: ${(error as Error).message}`;
    await deadLetters.parkUndecodable(record ?? message.body, reason);
    logger.error('stream record undecodable; dead-lettered with its raw image', { messageId: message.messageId, detail: reason });
    count('EffectUndecodable');
    return true;
  }
  const key = idempotencyKey(transition);
  const attempt = Number(message.attributes.ApproximateReceiveCount ?? 1);
  const firstAttemptAtMs = Number(message.attributes.ApproximateFirstReceiveTimestamp ?? clock().getTime());
  const deadLetter = (reason: DeadLetterReason, lastError: string) =>
    deadLetters.put({
      name: transition.name,
      version: transition.version,
      idempotencyKey: key,
      reason,
      transition,
      body: JSON.stringify(stateChangedEvent(transition)),
      record: JSON.stringify(record),
      lastError,
      attempts: attempt,
      firstAttemptAt: new Date(firstAttemptAtMs).toISOString(),
      deadLetteredAt: clock().toISOString(),
      status: 'dead',
    });

  // Ordering is never silently broken: behind a dead letter of this operation, wait (parked) until it is re-driven.
  if (await deadLetters.holdsBack(transition.name, transition.version)) {
    await deadLetter('waiting-behind', 'an earlier version of this operation is dead-lettered');
    logger.warn('effect parked behind a dead letter of its operation', { key });
    count('EffectParked');
    return true;
  }
  try {
    for (const sink of sinks) {
      if (await ledger.isDelivered(sink.name, key)) continue;
      await sink.deliver(transition);
      const earlierFailure = message.messageAttributes?.[LAST_ERROR_ATTRIBUTE]?.stringValue;
      await ledger.markDelivered(sink.name, key, { attempts: attempt, ...(earlierFailure && { earlierFailure }) });
      logger.info('effect delivered', { sink: sink.name, key, attempt, state: transition.state, previousState: transition.previousState });
      count('EffectDelivered');
    }
    if (message.messageAttributes?.[REDRIVEN_ATTRIBUTE]) await deadLetters.remove(transition.name, transition.version);
    return true;
  } catch (error) {
    const detail = error instanceof SinkError ? error.outcome : (error as Error).message;
    const decision = nextAttempt(
      { number: attempt, firstAttemptAtMs, nowMs: clock().getTime(), permanent: error instanceof SinkError && error.permanent },
      deps.retry,
    );
    if ('deadLetter' in decision) {
      await deadLetter(decision.deadLetter, detail);
      logger.error('effect dead-lettered', { key, attempt, reason: decision.deadLetter, detail });
      count('EffectDeadLettered');
      return true;
    }
    await deps.queue.retryAfter(message, decision.retryInMs, detail);
    logger.warn('effect attempt failed; retrying', { key, attempt, retryInMs: decision.retryInMs, detail });
    count('EffectRetried');
    return false;
  }
}
