/**
 * The table's stream, read: a record's NewImage (DynamoDB's attribute-value
 * format) as a plain item, so the AWS edges that receive stream records
 * (effects, history) need nothing of DynamoDB's formats themselves.
 */
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';

/** The record's NewImage as an item, only `attributes` when given; undefined when it has none. Throws when it does not decode. */
export function newImageOf(record: DynamoDBRecord, attributes?: readonly string[]): Record<string, unknown> | undefined {
  const image = record.dynamodb?.NewImage;
  if (!image) return undefined;
  const wanted = attributes ? Object.fromEntries(Object.entries(image).filter(([key]) => attributes.includes(key))) : image;
  return unmarshall(wanted as Parameters<typeof unmarshall>[0]);
}
