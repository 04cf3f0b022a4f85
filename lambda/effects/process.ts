/**
 * The effects handler: a batch of stream records, in shard order, each turned
 * into a transition and delivered to every sink once. The first failure stops
 * the batch: that record and every later one are reported as failed, so the
 * mapping retries from it and a later version never overtakes an earlier one.
 */
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { matchesFilter, STATE_CHANGE_FILTER } from './filter.ts';
import type { EffectLedger } from './ledger.ts';
import type { EffectSink } from './sinks.ts';
import { idempotencyKey, transitionFromRecord } from './transition.ts';

export interface EffectsDeps {
  sinks: EffectSink[];
  ledger: EffectLedger;
  logger: Logger;
}

export type EffectsHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;

class SkippedAfterFailure extends Error {
  override name = 'SkippedAfterFailure';
}

export function createEffectsHandler({ sinks, ledger, logger }: EffectsDeps): EffectsHandler {
  const processor = new BatchProcessor(EventType.DynamoDBStreams);
  return async (event) => {
    let failed = false;
    const deliver = async (record: DynamoDBRecord) => {
      if (failed) throw new SkippedAfterFailure('an earlier record of this batch failed');
      try {
        // The mapping's filter already dropped the rest; this guards a mapping configured without it.
        if (!matchesFilter(STATE_CHANGE_FILTER, record)) return;
        const transition = transitionFromRecord(record);
        const key = idempotencyKey(transition);
        for (const sink of sinks) {
          if (await ledger.isDelivered(sink.name, key)) {
            logger.info('effect already delivered', { sink: sink.name, key });
            continue;
          }
          await sink.deliver(transition);
          await ledger.markDelivered(sink.name, key);
          logger.info('effect delivered', { sink: sink.name, key, state: transition.state, previousState: transition.previousState });
        }
      } catch (error) {
        failed = true;
        logger.error('effect failed', { sequenceNumber: record.dynamodb?.SequenceNumber, error });
        throw error;
      }
    };
    return processPartialResponse(event, deliver, processor, { processInParallel: false, throwOnFullBatchFailure: false });
  };
}
