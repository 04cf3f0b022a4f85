/**
 * The AWS edge of the effects and history paths: DynamoDB stream records (as
 * the Pipe puts them on the effects queue, and the history function receives
 * them) decoded into the domain's records and transitions.
 */
import type { DynamoDBRecord } from 'aws-lambda';
import { InvalidStreamRecordError, type Transition, transitionOf } from '../../app/effects/transition.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import { newImageOf } from '../../engines/dynamodb/index.ts';

/** The transition of a DynamoDB stream record (the AWS edge: the Pipe's messages carry them). */
export function transitionFromRecord(record: DynamoDBRecord): Transition {
  let item: OperationRecord | undefined;
  try {
    item = newImageOf(record) as OperationRecord | undefined;
  } catch (error) {
    throw new InvalidStreamRecordError(`stream record ${record.eventID ?? '?'} cannot be decoded: ${(error as Error).message}`);
  }
  if (!item) throw new InvalidStreamRecordError(`stream record ${record.eventID ?? '?'} has no NewImage`);
  return transitionOf(item, `stream record ${record.eventID ?? '?'}`);
}

/**
 * True when no effect of the record's operation can have come before this
 * one, so no dead letter can hold it back: the job had no state before this
 * write (previousState is null: a state change or an outcome needs one, and
 * states never go back to none) and was never found overdue (the mark stays
 * on the record). An operation's first effect needs no dead-letter query.
 */
export function hasNoEarlierEffect(record: DynamoDBRecord): boolean {
  const image = record.dynamodb?.NewImage;
  return image?.previousState?.NULL === true && image.overdue === undefined;
}
