/** OperationStore on DynamoDB: optimistic concurrency through a condition on `version`. */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { OperationRecord } from '../core/reducer.ts';
import type { OperationStore, WriteOutcome } from './operation-store.ts';
import { PARTITION_KEY } from './table.ts';

export class DynamoDbOperationStore implements OperationStore {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
  ) {}

  async get(name: string): Promise<OperationRecord | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: { [PARTITION_KEY]: name }, ConsistentRead: true }),
    );
    return Item && recordFromItem(Item);
  }

  async write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const assignments: string[] = [];
    for (const [key, value] of Object.entries(next)) {
      if (key === PARTITION_KEY) continue;
      names[`#${key}`] = key;
      values[`:${key}`] = value;
      assignments.push(`#${key} = :${key}`);
    }
    // DynamoDB refuses names and values the expressions do not use.
    if (expectedVersion === undefined) names['#pk'] = PARTITION_KEY;
    else values[':expectedVersion'] = expectedVersion;
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [PARTITION_KEY]: next.name },
          UpdateExpression: `SET ${assignments.join(', ')}`,
          ConditionExpression: expectedVersion === undefined ? 'attribute_not_exists(#pk)' : '#version = :expectedVersion',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { ok: true };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        // The winner comes back in DynamoDB JSON even through the DocumentClient.
        return { ok: false, current: error.Item && recordFromItem(unmarshall(error.Item)) };
      }
      throw error;
    }
  }
}

/** The record's own attributes, in a stable order (items may carry index attributes too). */
function recordFromItem(item: Record<string, unknown>): OperationRecord {
  const record = item as unknown as OperationRecord;
  return {
    name: record.name,
    kind: record.kind,
    state: record.state ?? null,
    providerState: record.providerState ?? null,
    updateTime: record.updateTime ?? null,
    version: record.version,
    previousState: record.previousState ?? null,
    stateChanged: record.stateChanged ?? false,
    source: record.source,
    eventId: record.eventId ?? null,
    result: record.result ?? null,
    createdAt: record.createdAt,
    recordedAt: record.recordedAt,
  };
}
