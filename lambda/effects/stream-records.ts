/**
 * The AWS edge of the effects and history paths: DynamoDB stream records (as
 * the Pipe puts them on the effects queue, and the history function receives
 * them) decoded into the domain's records and transitions.
 */
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import type { OperationRecord } from '../core/reducer.ts';
import { InvalidStreamRecordError, type Transition, transitionOf } from './transition.ts';

/** The transition of a DynamoDB stream record (the AWS edge: the Pipe's messages carry them). */
export function transitionFromRecord(record: DynamoDBRecord): Transition {
  const image = record.dynamodb?.NewImage;
  if (!image) throw new InvalidStreamRecordError(`stream record ${record.eventID ?? '?'} has no NewImage`);
  let item: OperationRecord;
  try {
    item = unmarshall(image as Parameters<typeof unmarshall>[0]) as OperationRecord;
  } catch (error) {
    throw new InvalidStreamRecordError(`stream record ${record.eventID ?? '?'} cannot be decoded: ${(error as Error).message}`);
  }
  return transitionOf(item, `stream record ${record.eventID ?? '?'}`);
}
