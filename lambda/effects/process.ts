/**
 * The effects Lambda's queue edge: a batch of SQS FIFO messages (one group
 * per operation, fed by the Pipe from the table's stream, or put back by
 * redrive) turned into the domain's pending effects and delivered
 * (deliver.ts), the outcome turned back into SQS's terms.
 *
 * Message groups (operations) are handled side by side; within a group, in
 * order, and the first that must wait fails the rest of that group's
 * messages in the batch, so a later version never overtakes an earlier one.
 * A retry is the message's visibility (the backoff), for
 * EFFECTS_RETRY_FOR_SECONDS from its first attempt; then, or at once on 410
 * Gone, it becomes a whole dead letter and later versions of that operation
 * are parked behind it until it is re-driven. A message that cannot be
 * decoded is dead-lettered at once, raw, and holds up nothing.
 */
import type { DynamoDBRecord, SQSBatchItemFailure, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import type { DeadLetters } from '../../app/effects/dead-letters.ts';
import { type DeliveryDeps, deliverEffect, type PendingEffect } from '../../app/effects/deliver.ts';
import { InvalidStreamRecordError, type Transition } from '../../app/effects/transition.ts';
import { REDRIVEN_ATTRIBUTE, type RetryScheduler } from './sqs-retry-scheduler.ts';
import { hasNoEarlierEffect, transitionFromRecord } from './stream-records.ts';

export interface EffectsDeps extends DeliveryDeps {
  deadLetters: DeadLetters;
  queue: RetryScheduler;
}

export type EffectsHandler = (event: SQSEvent) => Promise<SQSBatchResponse>;

/** What redrive puts on the queue: the transition itself (a stream record is what the Pipe puts there). */
export interface RedrivenBody {
  redriven: Transition;
}

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
          const effect = await decoded(message, deps);
          if (!effect) continue;
          const outcome = await deliverEffect(effect, deps);
          if (outcome.kind === 'done') continue;
          await deps.queue.retryAfter(message, outcome.inMs);
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

/** The message as a pending effect; undefined (and dead-lettered raw) when it cannot be decoded. */
async function decoded(message: SQSRecord, deps: EffectsDeps): Promise<PendingEffect | undefined> {
  let body: unknown;
  try {
    body = JSON.parse(message.body);
    const fromRedrive = body && typeof body === 'object' && 'redriven' in body;
    const transition = fromRedrive ? checked((body as RedrivenBody).redriven) : transitionFromRecord(body as DynamoDBRecord);
    return {
      transition,
      // Read from the record itself: most effects are their operation's first, and need no dead-letter query.
      noEarlierEffect: !fromRedrive && hasNoEarlierEffect(body as DynamoDBRecord),
      attempt: Number(message.attributes.ApproximateReceiveCount ?? 1),
      firstAttemptAtMs: Number(message.attributes.ApproximateFirstReceiveTimestamp ?? (deps.clock?.() ?? new Date()).getTime()),
      redriven: Boolean(message.messageAttributes?.[REDRIVEN_ATTRIBUTE]),
    };
  } catch (error) {
    const reason =
      error instanceof InvalidStreamRecordError ? error.message : `message body is not a stream record: ${(error as Error).message}`;
    // The stream's position and the key are plain attributes, readable even when the image is not.
    const stream = body as Partial<DynamoDBRecord> | undefined;
    await deps.deadLetters.parkUndecodable(
      {
        sequence: stream?.dynamodb?.SequenceNumber ?? stream?.eventID ?? message.messageId,
        name: stream?.dynamodb?.Keys?.name?.S ?? stream?.dynamodb?.NewImage?.name?.S ?? null,
        raw: body ?? message.body,
      },
      reason,
    );
    deps.logger.error('stream record undecodable; dead-lettered with its raw image', { messageId: message.messageId, detail: reason });
    deps.metrics?.addMetric('EffectUndecodable', 'Count', 1);
    return undefined;
  }
}

function checked(transition: Transition): Transition {
  if (typeof transition?.name !== 'string' || typeof transition.version !== 'number')
    throw new InvalidStreamRecordError('a re-driven message that holds no transition');
  return transition;
}
