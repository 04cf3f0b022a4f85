/**
 * The effects handler: a batch of stream records, in shard order, each turned
 * into a transition and delivered to every sink once. The first failure stops
 * the batch: that record and every later one are reported as failed, so the
 * mapping retries from it and a later version never overtakes an earlier one.
 * A record that cannot be decoded is not a failure to retry: it goes to the
 * dead letters at once, raw, and the batch goes on.
 */
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Logger } from '@aws-lambda-powertools/logger';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import type { DeadLetters } from './dead-letters.ts';
import { matchesFilter, STATE_CHANGE_FILTER } from './filter.ts';
import type { EffectLedger } from './ledger.ts';
import type { EffectSink } from './sinks.ts';
import { InvalidStreamRecordError, idempotencyKey, type Transition, transitionFromRecord } from './transition.ts';

export interface EffectsDeps {
  sinks: EffectSink[];
  ledger: EffectLedger;
  deadLetters: DeadLetters;
  logger: Logger;
  metrics?: Metrics;
}

export type EffectsHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;

class SkippedAfterFailure extends Error {
  override name = 'SkippedAfterFailure';
}

export function createEffectsHandler({ sinks, ledger, deadLetters, logger, metrics }: EffectsDeps): EffectsHandler {
  const processor = new BatchProcessor(EventType.DynamoDBStreams);
  return async (event) => {
    let failed = false;
    const deliver = async (record: DynamoDBRecord) => {
      if (failed) throw new SkippedAfterFailure('an earlier record of this batch failed');
      try {
        // The mapping's filter already dropped the rest; this guards a mapping configured without it.
        if (!matchesFilter(STATE_CHANGE_FILTER, record)) return;
        let transition: Transition;
        try {
          transition = transitionFromRecord(record);
        } catch (error) {
          if (!(error instanceof InvalidStreamRecordError)) throw error;
          await deadLetters.parkUndecodable(record, error.message);
          logger.error('stream record undecodable; dead-lettered with its raw image', {
            sequenceNumber: record.dynamodb?.SequenceNumber,
            detail: error.message,
          });
          metrics?.addMetric('EffectUndecodable', MetricUnit.Count, 1);
          metrics?.publishStoredMetrics();
          return;
        }
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
