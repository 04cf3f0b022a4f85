/**
 * Ratchet's tables as CreateTable requests, from the same names as the stack's
 * (tables.ts): what the tests and the bench create on moto. The stack itself
 * builds them with CDK constructs (lib/ratchet.ts).
 */
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import {
  AGE_INDEX,
  AGE_INDEX_PARTITION,
  AGE_INDEX_SORT,
  DEAD_LETTER_KEYS,
  HISTORY_PARTITION_KEY,
  HISTORY_SORT_KEY,
  LEDGER_PARTITION_KEY,
  LIST_INDEX,
  LIST_INDEX_PARTITION,
  LIST_INDEX_SORT,
  OPEN_INDEX,
  OPEN_INDEX_PARTITION,
  OPEN_INDEX_PROJECTED,
  OPEN_INDEX_SORT,
  PARTITION_KEY,
  RECENT_INDEX,
  RECENT_INDEX_PARTITION,
  RECENT_INDEX_PROJECTION,
  RECENT_INDEX_SORT,
} from './tables.ts';

/** The operations table, its three indexes and its stream. */
export function createTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: PARTITION_KEY, AttributeType: 'S' },
      { AttributeName: OPEN_INDEX_PARTITION, AttributeType: 'S' },
      { AttributeName: OPEN_INDEX_SORT, AttributeType: 'S' },
      { AttributeName: LIST_INDEX_PARTITION, AttributeType: 'S' },
      { AttributeName: LIST_INDEX_SORT, AttributeType: 'S' },
      { AttributeName: AGE_INDEX_PARTITION, AttributeType: 'S' },
      { AttributeName: AGE_INDEX_SORT, AttributeType: 'S' },
    ],
    KeySchema: [{ AttributeName: PARTITION_KEY, KeyType: 'HASH' }],
    GlobalSecondaryIndexes: [
      {
        IndexName: OPEN_INDEX,
        KeySchema: [
          { AttributeName: OPEN_INDEX_PARTITION, KeyType: 'HASH' },
          { AttributeName: OPEN_INDEX_SORT, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: OPEN_INDEX_PROJECTED },
      },
      {
        IndexName: LIST_INDEX,
        KeySchema: [
          { AttributeName: LIST_INDEX_PARTITION, KeyType: 'HASH' },
          { AttributeName: LIST_INDEX_SORT, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
      {
        IndexName: AGE_INDEX,
        KeySchema: [
          { AttributeName: AGE_INDEX_PARTITION, KeyType: 'HASH' },
          { AttributeName: AGE_INDEX_SORT, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'KEYS_ONLY' },
      },
    ],
    BillingMode: 'PAY_PER_REQUEST',
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}

/** The history table and the list's index on its latest items. */
export function historyTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: HISTORY_PARTITION_KEY, AttributeType: 'S' },
      { AttributeName: HISTORY_SORT_KEY, AttributeType: 'N' },
      { AttributeName: RECENT_INDEX_PARTITION, AttributeType: 'S' },
      { AttributeName: RECENT_INDEX_SORT, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: HISTORY_PARTITION_KEY, KeyType: 'HASH' },
      { AttributeName: HISTORY_SORT_KEY, KeyType: 'RANGE' },
    ],
    GlobalSecondaryIndexes: [
      {
        IndexName: RECENT_INDEX,
        KeySchema: [
          { AttributeName: RECENT_INDEX_PARTITION, KeyType: 'HASH' },
          { AttributeName: RECENT_INDEX_SORT, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...RECENT_INDEX_PROJECTION] },
      },
    ],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

/** A table with a string `key` and nothing else declared: the ledger, and the local mapping's checkpoints. */
export function keyedTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [{ AttributeName: LEDGER_PARTITION_KEY, AttributeType: 'S' }],
    KeySchema: [{ AttributeName: LEDGER_PARTITION_KEY, KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

export function deadLetterTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: DEAD_LETTER_KEYS.partition, AttributeType: 'S' },
      { AttributeName: DEAD_LETTER_KEYS.sort, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: DEAD_LETTER_KEYS.partition, KeyType: 'HASH' },
      { AttributeName: DEAD_LETTER_KEYS.sort, KeyType: 'RANGE' },
    ],
    BillingMode: 'PAY_PER_REQUEST',
  };
}
