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
