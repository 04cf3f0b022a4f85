/**
 * Ratchet's DynamoDB tables described once, in plain values (no AWS SDK: the
 * CDK stack, lib/, imports this file without loading any function's code):
 * names of keys, indexes and TTL attributes, the history stream mapping's
 * filter and settings. The stack builds the tables from these, the engine
 * reads and writes them (engines/dynamodb/index.ts), and table-inputs.ts
 * makes the same tables on moto.
 *
 * The operations table. Besides the record's own fields an item carries:
 * - `writeKind`: what the last write was (`state-change`, `refresh`, `track`,
 *   `overdue`, `poll-schedule`); the effects filter passes `state-change` and `overdue`.
 * - `pollBucket` + `nextPollAt`: present only while the operation is open and
 *   pollable, so the `open-by-due-v2` index is sparse: reconcile finds the
 *   operations due for a poll without scanning.
 * - `ageBucket`: present only while the operation is observed (it has a state)
 *   and open, so the `open-by-age` index (sorted by `createdAt`, keys only)
 *   finds the jobs past their kind's overdue limit whatever their poll
 *   schedule: `age#<kind>#<n>` until it is marked overdue, `overdue#<n>` after
 *   (a write that keeps the job open keeps the value it finds); removed once
 *   terminal.
 * - No attribute shared by every operation: `GET /operations` reads the
 *   history table's `recent-operations` index (a read model the history
 *   writer keeps off the webhook's path). Items written before it carried
 *   `listPartition = "operations"`; every write now removes it.
 * - `effectsGroup`: the operation's message group on the effects queue, which
 *   the AWS Pipe reads from the stream record.
 */
import { createHash } from 'node:crypto';

export const EFFECTS_GROUP_ATTRIBUTE = 'effectsGroup';

/**
 * The effects-queue message group of an operation: SQS allows 128 characters
 * and names may have 512 bytes, so a hash of the name (43 characters).
 */
export function effectsGroupOf(name: string): string {
  return createHash('sha256').update(name).digest('base64url');
}

export const PARTITION_KEY = 'name';
/**
 * The due-job schedule, `open-by-due-v2`: open, pollable jobs by bucket and due
 * time, projecting only `kind` and `credential`. It is a new index, not
 * `open-by-due` changed, because DynamoDB changes an index's projection only by
 * deleting and re-creating it, one index a table update: a stack deployed with
 * `open-by-due` (everything projected) keeps it for one deploy beside this one
 * (the construct's `keepPreviousOpenIndex`, reconcile reading it meanwhile),
 * and drops it in the next. Both are kept by the same writes (the same keys).
 */
export const OPEN_INDEX = 'open-by-due-v2';
/** The schedule index of stacks deployed before `open-by-due-v2`: every attribute projected. */
export const PREVIOUS_OPEN_INDEX = 'open-by-due';
export const OPEN_INDEX_PARTITION = 'pollBucket';
export const OPEN_INDEX_SORT = 'nextPollAt';
/**
 * Open operations spread over this many index partitions (`open#<n>`), so the
 * hottest holds about 1/16 of the `open-by-due-v2` and `open-by-age` writes. It was
 * 8: items written then stay in `open#0`…`open#7` until their next write, and
 * are still read, since every reader queries every bucket.
 */
export const POLL_BUCKETS = 16;
/**
 * What `open-by-due-v2` holds beside its keys: what the AWS dispatcher groups due jobs by (provider and key). The
 * record itself is read by the claim that leases a job (ReturnValues ALL_NEW), so a poll's reschedule, which moves
 * only `nextPollAt`, writes the index's one small item and nothing more.
 */
export const OPEN_INDEX_PROJECTED = ['kind', 'credential'];
/**
 * Open jobs by when they were tracked: partitioned by kind and the name's hash
 * (no partition shared by every operation), sorted by `createdAt`, keys only,
 * so the write path pays an index write only when a job enters it, is marked
 * overdue or ends. Reconcile's overdue sweep reads `age#<kind>#<n>` partitions.
 */
export const AGE_INDEX = 'open-by-age';
export const AGE_INDEX_PARTITION = 'ageBucket';
export const AGE_INDEX_SORT = 'createdAt';

/**
 * The operations table's `recent-by-recorded` index (partition `listPartition`,
 * sort `recordedAt`): it holds only the unprocessable deliveries now, under
 * their own partition value. Operations listed there before (`listPartition =
 * "operations"`) leave it on their next write, which removes the attribute.
 * The index stays as it was, so a deploy replaces no index.
 */
export const LIST_INDEX = 'recent-by-recorded';
export const LIST_INDEX_PARTITION = 'listPartition';
export const LIST_INDEX_SORT = 'recordedAt';

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

export type WriteKind = 'state-change' | 'refresh' | 'result' | 'track' | 'overdue' | 'poll-schedule';

/** A stable hash of a name, one of POLL_BUCKETS. */
function bucketOf(name: string): number {
  let hash = 0;
  for (const char of name) hash = (hash * 31 + (char.codePointAt(0) ?? 0)) >>> 0;
  return hash % POLL_BUCKETS;
}

/** The index partition of an operation: a stable hash of its name. */
export function pollBucketOf(name: string): string {
  return `open#${bucketOf(name)}`;
}

/** The `open-by-age` partitions of the open jobs of `kind` not yet marked overdue. */
export function ageBucketsOf(kind: string): string[] {
  return Array.from({ length: POLL_BUCKETS }, (_, n) => `age#${kind}#${n}`);
}

/** An open job's `open-by-age` partition: by kind and name until it is marked overdue, then by name alone. */
export function ageBucketOf(name: string, kind: string, marked = false): string {
  return marked ? `overdue#${bucketOf(name)}` : `age#${kind}#${bucketOf(name)}`;
}

/** The effects ledger table: one item per `<sink>#<name>#<version>`, expiring after LEDGER_RETENTION_SECONDS. */
export const LEDGER_PARTITION_KEY = 'key';
export const LEDGER_TTL_ATTRIBUTE = 'expiresAt';

/** The dead-letter table. Partition: the operation's name (or UNDECODABLE); sort: `v<version, 12 digits>` or the stream sequence number. */
export const DEAD_LETTER_KEYS = { partition: 'operation', sort: 'entry' } as const;
export const DEAD_LETTER_TTL_ATTRIBUTE = 'expiresAt';

/** The history table: partition name, sort version; and the stream records it keeps: every applied write (a state change, a same-state refresh, a track, the overdue mark). */
export const HISTORY_FILTER = {
  eventName: ['INSERT', 'MODIFY'],
  dynamodb: { NewImage: { writeKind: { S: ['state-change', 'refresh', 'result', 'track', 'overdue'] } } },
} as const;

/** The history stream mapping's settings (the stack's, and the tests' mapping on moto). */
export const HISTORY_MAPPING = { batchSize: 100, retryAttempts: 10 } as const;

export const HISTORY_PARTITION_KEY = 'name';
export const HISTORY_SORT_KEY = 'version';
export const HISTORY_TTL_ATTRIBUTE = 'expiresAt';

/**
 * The list of operations (`GET /operations`), a read model in the history
 * table: beside the entries (versions from 1) one latest item per operation
 * at version LATEST_VERSION, replaced only by a newer version, never expiring.
 * It carries `listShard` (`list#<n>`, a stable hash of the name over
 * LIST_SHARDS, so no partition holds more than about 1/32 of the list's
 * writes) and `listSort` (`<recordedAt>#<name>`: unique, so one position
 * orders every shard), read through the `recent-operations` index, newest
 * first, with what the list's filters read projected beside the keys.
 */
export const LATEST_VERSION = 0;
export const RECENT_INDEX = 'recent-operations';
export const RECENT_INDEX_PARTITION = 'listShard';
export const RECENT_INDEX_SORT = 'listSort';
export const LIST_SHARDS = 32;
/** The latest item's own attributes beside its keys: the version it holds, and what the list's filters read. */
export const LATEST_OF = 'latestVersion';
export const OPEN_OVERDUE_ATTRIBUTE = 'openOverdue';
export const RECENT_INDEX_PROJECTION = ['state', 'kind', OPEN_OVERDUE_ATTRIBUTE] as const;

/** An operation's list shard: a stable hash of its name. */
export function listShardOf(name: string): string {
  return `list#${createHash('sha256').update(name).digest().readUInt32BE(0) % LIST_SHARDS}`;
}

/** Every list shard, for the readers. */
export function listShards(): string[] {
  return Array.from({ length: LIST_SHARDS }, (_, n) => `list#${n}`);
}

/** An operation's place in the list: most recently recorded last, the name breaking ties. */
export function listSortOf(recordedAt: string, name: string): string {
  return `${recordedAt}#${name}`;
}
