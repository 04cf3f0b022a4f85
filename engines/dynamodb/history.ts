/**
 * History in AWS: a DynamoDB table (partition: name, sort: version), entries
 * kept `HISTORY_RETENTION_DAYS` by TTL; and beside them, at version 0, each
 * operation's latest item: the read model `GET /operations` lists (tables.ts).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, PutCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { DEFAULT_HISTORY_RETENTION_DAYS, entryOf, type HistoryEntry, type HistoryLog, MAX_HISTORY_ENTRIES } from '../../app/history.ts';
import { rankOf, TERMINAL_RANK } from '../../core/lifecycle.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import {
  HISTORY_PARTITION_KEY,
  HISTORY_SORT_KEY,
  HISTORY_TTL_ATTRIBUTE,
  LATEST_OF,
  LATEST_VERSION,
  listShardOf,
  listSortOf,
  OPEN_OVERDUE_ATTRIBUTE,
  RECENT_INDEX_PARTITION,
  RECENT_INDEX_SORT,
} from './tables.ts';

/** What the list keeps of an applied write: its place, and what the filters read. */
export type Listing = Pick<OperationRecord, 'name' | 'version' | 'kind' | 'state' | 'recordedAt'> & {
  /** Open and marked overdue. */
  openOverdue: boolean;
};

/** What the list keeps of an operation's item or stream image; undefined for one that is no operation. */
export function listingOf(item: Record<string, unknown>): Listing | undefined {
  const { name, version, kind, recordedAt, overdue } = item;
  if (typeof name !== 'string' || typeof version !== 'number' || typeof kind !== 'string' || typeof recordedAt !== 'string')
    return undefined;
  const state = (item.state as OperationRecord['state'] | undefined) ?? null;
  return {
    name,
    version,
    kind: kind as Listing['kind'],
    state,
    recordedAt,
    openOverdue: overdue !== undefined && overdue !== null && rankOf(state) < TERMINAL_RANK,
  };
}

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

  /**
   * The operation's latest item, replaced only by a newer version: a stream
   * record handed over again, or after a newer one, changes nothing. No TTL
   * (an operation is never deleted). An update, not a put: the condition
   * reads the version it holds.
   */
  async keepLatest(listing: Listing): Promise<void> {
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [HISTORY_PARTITION_KEY]: listing.name, [HISTORY_SORT_KEY]: LATEST_VERSION },
          UpdateExpression: `SET #of = :version, #shard = :shard, #sort = :sort, #state = :state, #kind = :kind${listing.openOverdue ? ', #overdue = :true' : ' REMOVE #overdue'}`,
          ConditionExpression: 'attribute_not_exists(#of) OR #of < :version',
          ExpressionAttributeNames: {
            '#of': LATEST_OF,
            '#shard': RECENT_INDEX_PARTITION,
            '#sort': RECENT_INDEX_SORT,
            '#state': 'state',
            '#kind': 'kind',
            '#overdue': OPEN_OVERDUE_ATTRIBUTE,
          },
          ExpressionAttributeValues: {
            ':version': listing.version,
            ':shard': listShardOf(listing.name),
            ':sort': listSortOf(listing.recordedAt, listing.name),
            ':state': listing.state,
            ':kind': listing.kind,
            ...(listing.openOverdue && { ':true': true }),
          },
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return; // it holds this version or a newer one
      throw error;
    }
  }

  /** In version order; entries past their retention may still show until DynamoDB's TTL removes them. */
  async list(name: string): Promise<HistoryEntry[]> {
    const entries: HistoryEntry[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const { Items = [], LastEvaluatedKey } = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          // Versions from 1: the latest item (version 0) is the list's, not an entry.
          KeyConditionExpression: '#name = :name AND #version > :latest',
          ExpressionAttributeNames: { '#name': HISTORY_PARTITION_KEY, '#version': HISTORY_SORT_KEY },
          ExpressionAttributeValues: { ':name': name, ':latest': LATEST_VERSION },
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
