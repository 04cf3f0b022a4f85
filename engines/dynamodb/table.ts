/**
 * The operations table, described once: the CDK stack and the local runtime
 * both build it from these constants.
 *
 * Besides the record's own fields an item carries:
 * - `writeKind`: what the last write was (`state-change`, `refresh`, `track`,
 *   `overdue`, `poll-schedule`); the effects filter passes `state-change` and `overdue`.
 * - `pollBucket` + `nextPollAt`: present only while the operation is open and
 *   pollable, so the `open-by-due` index is sparse: reconcile finds the
 *   operations due for a poll without scanning.
 * - `listPartition`: on every operation, so `recent-by-recorded` lists them
 *   newest first (the unmapped-delivery note has none).
 * - `effectsGroup`: the operation's message group on the effects queue, which
 *   the AWS Pipe reads from the stream record.
 */
import { createHash } from 'node:crypto';
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';

export const EFFECTS_GROUP_ATTRIBUTE = 'effectsGroup';

/**
 * The effects-queue message group of an operation: SQS allows 128 characters
 * and names may have 512 bytes, so a hash of the name (43 characters).
 */
export function effectsGroupOf(name: string): string {
  return createHash('sha256').update(name).digest('base64url');
}

export const PARTITION_KEY = 'name';
export const OPEN_INDEX = 'open-by-due';
export const OPEN_INDEX_PARTITION = 'pollBucket';
export const OPEN_INDEX_SORT = 'nextPollAt';
/** Open operations spread over this many index partitions. */
export const POLL_BUCKETS = 8;
/**
 * `GET /operations`, most recently recorded first: every operation item carries
 * `listPartition` (one value) and the index sorts on `recordedAt`. One index
 * partition takes about 1,000 writes a second, far above a webhook receiver's
 * rate; beyond that it would be sharded.
 */
export const LIST_INDEX = 'recent-by-recorded';
export const LIST_INDEX_PARTITION = 'listPartition';
export const LIST_INDEX_SORT = 'recordedAt';
export const LIST_PARTITION_VALUE = 'operations';

/**
 * The one item that is not an operation: the last verified delivery the API
 * did not map (see DeliveryReceipts). `:` is refused in operation names, so it
 * never meets one; it carries no `writeKind` and no index keys, so neither the
 * effects filter nor reconcile ever sees it.
 */
export const UNMAPPED_RECEIPT_KEY = 'ratchet:unmapped-delivery';

/**
 * Unprocessable deliveries (UnprocessableLog) are items too, keyed by this
 * prefix and the webhook-id, listed through `recent-by-recorded` under their
 * own partition value, and deleted by the table's TTL on `expiresAt` (which
 * no operation carries). Like the receipt they have no `writeKind`: no stream
 * consumer takes them.
 */
export const UNPROCESSABLE_KEY_PREFIX = 'ratchet:unprocessable:';
export const UNPROCESSABLE_PARTITION_VALUE = 'unprocessable';
export const TTL_ATTRIBUTE = 'expiresAt';

export type WriteKind = 'state-change' | 'refresh' | 'track' | 'overdue' | 'poll-schedule';

export function createTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: PARTITION_KEY, AttributeType: 'S' },
      { AttributeName: OPEN_INDEX_PARTITION, AttributeType: 'S' },
      { AttributeName: OPEN_INDEX_SORT, AttributeType: 'S' },
      { AttributeName: LIST_INDEX_PARTITION, AttributeType: 'S' },
      { AttributeName: LIST_INDEX_SORT, AttributeType: 'S' },
    ],
    KeySchema: [{ AttributeName: PARTITION_KEY, KeyType: 'HASH' }],
    GlobalSecondaryIndexes: [
      {
        IndexName: OPEN_INDEX,
        KeySchema: [
          { AttributeName: OPEN_INDEX_PARTITION, KeyType: 'HASH' },
          { AttributeName: OPEN_INDEX_SORT, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
      {
        IndexName: LIST_INDEX,
        KeySchema: [
          { AttributeName: LIST_INDEX_PARTITION, KeyType: 'HASH' },
          { AttributeName: LIST_INDEX_SORT, KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'ALL' },
      },
    ],
    BillingMode: 'PAY_PER_REQUEST',
    StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
  };
}

/** The index partition of an operation: a stable hash of its name. */
export function pollBucketOf(name: string): string {
  let hash = 0;
  for (const char of name) hash = (hash * 31 + (char.codePointAt(0) ?? 0)) >>> 0;
  return `open#${hash % POLL_BUCKETS}`;
}

/** The effects ledger table: one item per `<sink>#<name>#<version>`, expiring after LEDGER_RETENTION_SECONDS. */
export const LEDGER_PARTITION_KEY = 'key';
export const LEDGER_TTL_ATTRIBUTE = 'expiresAt';

/** The dead-letter table. Partition: the operation's name (or UNDECODABLE); sort: `v<version, 12 digits>` or the stream sequence number. */
export const DEAD_LETTER_KEYS = { partition: 'operation', sort: 'entry' } as const;
export const DEAD_LETTER_TTL_ATTRIBUTE = 'expiresAt';
