/** History in AWS: a DynamoDB table (partition: name, sort: version), kept `HISTORY_RETENTION_DAYS` by TTL. */
import { type DynamoDBDocumentClient, PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { DEFAULT_HISTORY_RETENTION_DAYS, entryOf, type HistoryEntry, type HistoryLog, MAX_HISTORY_ENTRIES } from '../../app/history.ts';
import { HISTORY_PARTITION_KEY, HISTORY_TTL_ATTRIBUTE } from './tables.ts';

export class DynamoDbHistory implements HistoryLog {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly retentionDays = DEFAULT_HISTORY_RETENTION_DAYS,
  ) {}

  /** Idempotent per `name` + `version`: the item is the stream image's, whatever the delivery. */
  async record(name: string, entry: HistoryEntry): Promise<void> {
    const expiresAt = Math.floor(Date.parse(entry.recordedAt) / 1000) + this.retentionDays * 86_400;
    await this.client.send(new PutCommand({ TableName: this.tableName, Item: { name, ...entry, [HISTORY_TTL_ATTRIBUTE]: expiresAt } }));
  }

  /** In version order; entries past their retention may still show until DynamoDB's TTL removes them. */
  async list(name: string): Promise<HistoryEntry[]> {
    const entries: HistoryEntry[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const { Items = [], LastEvaluatedKey } = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: '#name = :name',
          ExpressionAttributeNames: { '#name': HISTORY_PARTITION_KEY },
          ExpressionAttributeValues: { ':name': name },
          ScanIndexForward: false, // newest first, so a cap keeps the newest
          ...(start && { ExclusiveStartKey: start }),
        }),
      );
      entries.push(...Items.map(entryOf));
      start = LastEvaluatedKey;
    } while (start && entries.length < MAX_HISTORY_ENTRIES);
    return entries.slice(0, MAX_HISTORY_ENTRIES).reverse();
  }
}
