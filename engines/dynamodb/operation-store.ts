/**
 * OperationStore and PollSchedule on DynamoDB: optimistic concurrency through a
 * condition on `version`, and the sparse open-operations index kept in step
 * with every write.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import {
  type ApplyOutcome,
  type DeliveryReceipts,
  InvalidCursorError,
  type ListFilter,
  type OperationQueries,
  type OperationStore,
  type OperationView,
  type OverdueWatch,
  type PollCandidate,
  type PollRequests,
  type PollSchedule,
  type PollState,
  StoreRejectedError,
  type UnmappedDelivery,
  type UnprocessableDelivery,
  type UnprocessableLog,
  UnsupportedFilterError,
  type WriteOutcome,
} from '../../app/ports.ts';
import { writeKindOf } from '../../core/change.ts';
import {
  isTerminal,
  OPERATION_KINDS,
  OPERATION_STATES,
  type OperationKind,
  PROVIDER_KINDS,
  providerOf,
  rankOf,
  TERMINAL_RANK,
} from '../../core/lifecycle.ts';
import type { OverdueLimits } from '../../core/overdue.ts';
import { isPolled, type OperationEvent, type OperationRecord } from '../../core/reducer.ts';
import { timeAfter } from '../../core/time.ts';
import { batchGetAll } from './batch-get.ts';
import { isPermanentRejection } from './client.ts';
import { applyCompiled, type CompiledOutcome, type CompiledTable } from './compiled-apply.ts';
import { compileWrite, RANK_ATTRIBUTE, type Variant } from './compiled-write.ts';
import { cursorOf, MAX_LIST_ROUNDS, positionOf, RecentOperations } from './recent-operations.ts';
import {
  AGE_INDEX,
  AGE_INDEX_PARTITION,
  AGE_INDEX_SORT,
  ageBucketOf,
  ageBucketsOf,
  EFFECTS_GROUP_ATTRIBUTE,
  effectsGroupOf,
  LIST_INDEX,
  LIST_INDEX_PARTITION,
  LIST_INDEX_SORT,
  OPEN_INDEX,
  OPEN_INDEX_PARTITION,
  OPEN_INDEX_SORT,
  PARTITION_KEY,
  POLL_BUCKETS,
  pollBucketOf,
  TTL_ATTRIBUTE,
  UNMAPPED_RECEIPT_KEY,
  UNPROCESSABLE_KEY_PREFIX,
  UNPROCESSABLE_PARTITION_VALUE,
  type WriteKind,
} from './tables.ts';

/** Kinds reconcile polls: all of them. (Pure: a bundle that opens no operations table leaves it out.) */
const POLLABLE: ReadonlySet<OperationKind> = /* @__PURE__ */ new Set(OPERATION_KINDS);
/** Queries of the age index in flight at once (one per kind with a limit and partition). */
const AGE_QUERIES_AT_ONCE = 16;
/** How long an unprocessable delivery is kept (the table's TTL deletes it after). */
const UNPROCESSABLE_RETENTION_SECONDS = 30 * 86_400;

export class DynamoDbOperationStore
  implements OperationStore, OperationQueries, PollSchedule, PollRequests, DeliveryReceipts, UnprocessableLog, OverdueWatch
{
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    /** The history table, where the list's read model is kept (tables.ts); only `list` needs it. */
    private readonly listTable?: string,
    /** The schedule index the due jobs are read from: OPEN_INDEX, or PREVIOUS_OPEN_INDEX while a stack upgrades (tables.ts). */
    private readonly openIndex: string = OPEN_INDEX,
  ) {}

  async get(name: string): Promise<OperationRecord | undefined> {
    const item = await this.item(name);
    return item && recordFromItem(item);
  }

  /** A strongly consistent read of the whole item (the record and what the index and reconcile keep beside it). */
  private async item(name: string): Promise<Record<string, unknown> | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: { [PARTITION_KEY]: name }, ConsistentRead: true }),
    );
    return Item;
  }

  async write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const assignments: string[] = [];
    const writeKind: WriteKind = writeKindOf(next);
    const item = {
      ...next,
      writeKind,
      [EFFECTS_GROUP_ATTRIBUTE]: effectsGroupOf(next.name),
      [RANK_ATTRIBUTE]: rankOf(next.state),
    };
    for (const [key, value] of Object.entries(item)) {
      if (key === PARTITION_KEY) continue;
      names[`#${key}`] = key;
      values[`:${key}`] = value;
      assignments.push(`#${key} = :${key}`);
    }
    // Keep the open-operations index in step: in it while open and pollable, out of it once terminal. The write that
    // marks it overdue leaves its schedule as it was (a job whose polling stopped stays stopped).
    const removed: string[] = [];
    const schedule = !isPolled(next) || !POLLABLE.has(next.kind) ? 'remove' : next.source === 'overdue' ? 'keep' : 'set';
    if (schedule !== 'keep') {
      names['#bucket'] = OPEN_INDEX_PARTITION;
      names['#due'] = OPEN_INDEX_SORT;
    }
    if (schedule === 'remove') removed.push('#bucket', '#due');
    if (schedule === 'set') {
      values[':bucket'] = pollBucketOf(next.name);
      assignments.push('#bucket = :bucket', '#due = if_not_exists(#due, :recordedAt)');
    }
    // The age index: an observed open job, in its kind's partition until marked overdue (the whole record is at hand).
    names['#age'] = AGE_INDEX_PARTITION;
    if (next.state === null || isTerminal(next.state)) removed.push('#age');
    else {
      values[':age'] = ageBucketOf(next.name, next.kind, next.overdue !== undefined);
      assignments.push('#age = :age');
    }
    // What a version may drop: the wait for an outcome once it came, the result write's mark on the version after.
    for (const field of ['resultPending', 'resultWrite'] as const) {
      if (next[field]) continue;
      names[`#${field}`] = field;
      removed.push(`#${field}`);
    }
    // No operation is in `recent-by-recorded` any more (tables.ts): one written before leaves it here.
    names['#list'] = LIST_INDEX_PARTITION;
    removed.push('#list');
    const removals = ` REMOVE ${removed.join(', ')}`;
    // DynamoDB refuses names and values the expressions do not use.
    if (expectedVersion === undefined) names['#pk'] = PARTITION_KEY;
    else values[':expectedVersion'] = expectedVersion;
    unmarshallable(values);
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [PARTITION_KEY]: next.name },
          UpdateExpression: `SET ${assignments.join(', ')}${removals}`,
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
      throw classified(error);
    }
  }

  async describe(name: string): Promise<OperationView | undefined> {
    const item = await this.item(name);
    return item && viewFromItem(item);
  }

  /**
   * Newest first, from the list's read model in the history table
   * (recent-operations.ts), eventually consistent: an operation shows there
   * once the history writer has taken its write from the stream (about a
   * second). Each page's views are read from this table and checked against
   * the filter again, so what is shown is current; a filtered page reads on
   * until it is full (at most MAX_LIST_ROUNDS rounds of shard queries).
   */
  async list(filter: ListFilter): Promise<{ operations: OperationView[]; nextCursor?: string }> {
    if (filter.effects)
      throw new UnsupportedFilterError(
        "effects is Ratchet on one machine's filter: in AWS a receiver's failures show in the EffectsBacklog alarms, the effects function's logs and npx ratchet-aws redrive --stack <name> --list",
      );
    if (!this.listTable) throw new Error('the operations list is kept in the history table: open the operations table with it');
    const before = filter.cursor === undefined ? undefined : positionOf(filter.cursor);
    const recent = new RecentOperations(this.client, this.listTable, filter, before);
    const operations: OperationView[] = [];
    while (operations.length < filter.limit && !recent.done && recent.rounds < MAX_LIST_ROUNDS) {
      const names = await recent.next(filter.limit - operations.length);
      operations.push(...(await this.views(names)).filter((view) => matches(filter, view)));
    }
    const position = recent.position;
    return { operations, ...(position !== undefined && { nextCursor: cursorOf(position) }) };
  }

  /** The views of `names`, in their order (BatchGetItem, batch-get.ts; one no longer here is left out). */
  private async views(names: readonly string[]): Promise<OperationView[]> {
    const items = await batchGetAll(
      this.client,
      this.tableName,
      names.map((name) => ({ [PARTITION_KEY]: name })),
    );
    const found = new Map(items.map((item) => [item[PARTITION_KEY] as string, viewFromItem(item)]));
    return names.flatMap((name) => found.get(name) ?? []);
  }

  /**
   * One conditional request, usually (compiled-apply.ts): the reducer's order
   * compiled into the write, the variant picked by the record at hand; a
   * refusal hands back the stored item, with no read.
   */
  async apply(event: OperationEvent, now: string, hint: { current?: OperationRecord } = {}): Promise<ApplyOutcome> {
    return applyCompiled(this.compiled, event, now, hint);
  }

  private readonly compiled: CompiledTable = {
    send: (event, now, variant) => this.sendCompiled(event, now, variant),
    write: (next, expectedVersion) => this.write(next, expectedVersion),
  };

  /** One compiled request of `variant`, as it is: what apply builds on (and the property test of the condition reads). */
  async sendCompiled(event: OperationEvent, now: string, variant: Variant): Promise<CompiledOutcome> {
    const write = compileWrite(event, now, variant);
    unmarshallable(write.ExpressionAttributeValues);
    try {
      const { Attributes } = await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [PARTITION_KEY]: event.name },
          ...write,
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { ok: true, record: recordFromItem(Attributes as Record<string, unknown>) };
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        const item = error.Item && unmarshall(error.Item);
        return { ok: false, current: item && recordFromItem(item), legacy: item !== undefined && typeof item[RANK_ATTRIBUTE] !== 'number' };
      }
      throw classified(error);
    }
  }

  /**
   * Every partition of the sparse open index queried for what is due (no
   * scan; the index holds the keys, kind and credential), in parallel, the
   * earliest `limit` of them taken: each leased until `now + leaseMs` by one
   * conditional write that hands back its record (`lease`), or without a
   * lease read whole (a consistent GetItem).
   */
  async claimDue(now: string, limit: number, leaseMs?: number): Promise<PollCandidate[]> {
    const pages = await Promise.all(Array.from({ length: POLL_BUCKETS }, (_, bucket) => this.dueJobs(bucket, now, limit)));
    const chosen = pages
      .flatMap((page) => page.jobs)
      .sort((a, b) => (a.due < b.due ? -1 : 1))
      .slice(0, limit);
    if (leaseMs !== undefined) {
      const until = timeAfter(now, leaseMs);
      const leased = await Promise.all(chosen.map((job) => this.lease(job.name, job.due, until)));
      return leased.filter((candidate) => candidate !== undefined);
    }
    const items = await Promise.all(chosen.map((job) => this.item(job.name)));
    // Read after the index: one that ended or was rescheduled meanwhile is as it is now.
    return items.flatMap((item) => (item?.[OPEN_INDEX_SORT] === undefined ? [] : [candidateOf(item, item[OPEN_INDEX_SORT] as string)]));
  }

  /**
   * One page of one `open-by-due-v2` partition: the jobs due at `now`, earliest
   * first, as the index holds them (what the AWS dispatcher hands out, grouped
   * by provider and key); `next` where there are more.
   */
  async dueJobs(bucket: number, now: string, limit: number, start?: Record<string, unknown>): Promise<DuePage> {
    const { Items = [], LastEvaluatedKey } = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        IndexName: this.openIndex,
        KeyConditionExpression: '#bucket = :bucket AND #due <= :now',
        ExpressionAttributeNames: { '#bucket': OPEN_INDEX_PARTITION, '#due': OPEN_INDEX_SORT },
        ExpressionAttributeValues: { ':bucket': `open#${bucket}`, ':now': now },
        Limit: limit,
        ...(start && { ExclusiveStartKey: start }),
      }),
    );
    const jobs = Items.map((item) => ({
      name: item[PARTITION_KEY] as string,
      due: item[OPEN_INDEX_SORT] as string,
      kind: item.kind as OperationKind,
      ...(typeof item.credential === 'string' && { credential: item.credential }),
    }));
    return { jobs, ...(LastEvaluatedKey && { next: LastEvaluatedKey }) };
  }

  /**
   * Leases a job for its poll: its next poll moved to `until`, only if it is
   * still due at `due` as it was read (one conditional UpdateItem, ALL_NEW:
   * the record with no read). Undefined when another claim or a write moved
   * it first: a job is polled at most once per due time, however often it is
   * handed out. A lease not followed by a poll (its poller killed) ends at
   * `until`, and the job is due again.
   */
  async lease(name: string, due: string, until: string): Promise<PollCandidate | undefined> {
    const writeKind: WriteKind = 'poll-schedule';
    try {
      const { Attributes } = await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [PARTITION_KEY]: name },
          UpdateExpression: 'SET #due = :until, writeKind = :writeKind',
          ConditionExpression: '#due = :seen',
          ExpressionAttributeNames: { '#due': OPEN_INDEX_SORT },
          ExpressionAttributeValues: { ':until': until, ':seen': due, ':writeKind': writeKind },
          ReturnValues: 'ALL_NEW',
        }),
      );
      const item = Attributes as Record<string, unknown>;
      await this.putInAgeIndex(item);
      return candidateOf(item, due);
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return undefined;
      throw error;
    }
  }

  /** An observed open job written before the age index existed is put in it (a second write, for those jobs only). */
  private async putInAgeIndex(item: Record<string, unknown>): Promise<void> {
    const record = recordFromItem(item);
    if (item[AGE_INDEX_PARTITION] !== undefined || record.state === null || isTerminal(record.state)) return;
    await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: { [PARTITION_KEY]: record.name },
        UpdateExpression: 'SET #age = if_not_exists(#age, :age)',
        ConditionExpression: 'attribute_exists(#pk)',
        ExpressionAttributeNames: { '#age': AGE_INDEX_PARTITION, '#pk': PARTITION_KEY },
        ExpressionAttributeValues: { ':age': ageBucketOf(record.name, record.kind, record.overdue !== undefined) },
      }),
    );
  }

  /**
   * The open jobs not yet marked whose kind's limit has passed at `now` (the scheduled function's clock; one runs at a
   * time): each kind's partitions of the sparse `open-by-age` index queried for what was tracked before its cutoff (no
   * scan), the oldest `limit` of them read whole (consistent reads: the mark is written on the version read).
   */
  async findOverdue(limits: OverdueLimits, now: string, limit: number): Promise<{ at: string; records: OperationRecord[] }> {
    const queries = OPERATION_KINDS.flatMap((kind) => {
      const seconds = limits[kind];
      return seconds === null ? [] : ageBucketsOf(kind).map((bucket) => ({ bucket, cutoff: timeAfter(now, -seconds * 1000) }));
    });
    const keys: Array<Record<string, unknown>> = [];
    for (let i = 0; i < queries.length; i += AGE_QUERIES_AT_ONCE) {
      const pages = await Promise.all(
        queries.slice(i, i + AGE_QUERIES_AT_ONCE).map(({ bucket, cutoff }) =>
          this.client.send(
            new QueryCommand({
              TableName: this.tableName,
              IndexName: AGE_INDEX,
              KeyConditionExpression: '#age = :bucket AND #since <= :cutoff',
              ExpressionAttributeNames: { '#age': AGE_INDEX_PARTITION, '#since': AGE_INDEX_SORT },
              ExpressionAttributeValues: { ':bucket': bucket, ':cutoff': cutoff },
              Limit: limit,
            }),
          ),
        ),
      );
      for (const { Items = [] } of pages) keys.push(...Items);
    }
    keys.sort((a, b) => ((a[AGE_INDEX_SORT] as string) < (b[AGE_INDEX_SORT] as string) ? -1 : 1));
    const items = await Promise.all(keys.slice(0, limit).map((key) => this.item(key[PARTITION_KEY] as string)));
    // The index is read eventually: one marked or ended since is left out here (the mark would refuse it anyway).
    const records = items.flatMap((item) => {
      const record = item && recordFromItem(item);
      return record && record.state !== null && !isTerminal(record.state) && !record.overdue ? [record] : [];
    });
    return { at: now, records };
  }

  async pollNow(name: string, now: string): Promise<boolean> {
    const writeKind: WriteKind = 'poll-schedule';
    const terminal = OPERATION_STATES.filter((state) => isTerminal(state));
    const values: Record<string, unknown> = { ':bucket': pollBucketOf(name), ':due': now, ':writeKind': writeKind, ':zero': 0 };
    terminal.forEach((state, i) => {
      values[`:t${i}`] = state;
    });
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [PARTITION_KEY]: name },
          UpdateExpression:
            'SET #bucket = :bucket, #due = :due, writeKind = :writeKind, unchangedPolls = :zero, failedPolls = :zero, notFoundPolls = :zero REMOVE pollNote',
          // Open, or ended with its outcome still to come.
          ConditionExpression: `attribute_exists(#pk) AND (NOT (#state IN (${terminal.map((_, i) => `:t${i}`).join(', ')})) OR attribute_exists(#pending))`,
          ExpressionAttributeNames: {
            '#pk': PARTITION_KEY,
            '#state': 'state',
            '#pending': 'resultPending',
            '#bucket': OPEN_INDEX_PARTITION,
            '#due': OPEN_INDEX_SORT,
          },
          ExpressionAttributeValues: values,
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  async schedulePoll(
    name: string,
    version: number,
    poll: Omit<PollState, 'nextPollAt'> & { nextPollAt: string | null; note?: string },
  ): Promise<boolean> {
    const writeKind: WriteKind = 'poll-schedule';
    const values: Record<string, unknown> = {
      ':version': version,
      ':writeKind': writeKind,
      ':unchanged': poll.unchangedPolls,
      ':failed': poll.failedPolls,
      ':notFound': poll.notFoundPolls,
      ':note': poll.note ?? null,
    };
    let update =
      'SET writeKind = :writeKind, unchangedPolls = :unchanged, failedPolls = :failed, notFoundPolls = :notFound, pollNote = :note';
    if (poll.nextPollAt === null) update += ' REMOVE #bucket, #due';
    else {
      values[':due'] = poll.nextPollAt;
      update += ', #due = :due';
    }
    try {
      await this.client.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [PARTITION_KEY]: name },
          UpdateExpression: update,
          // Only while still open at this version: a concurrent webhook or terminal state wins.
          ConditionExpression: '#version = :version AND attribute_exists(#bucket)',
          ExpressionAttributeNames: { '#version': 'version', '#bucket': OPEN_INDEX_PARTITION, '#due': OPEN_INDEX_SORT },
          ExpressionAttributeValues: values,
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  async recordUnmapped({ type, webhookId, receivedAt }: UnmappedDelivery): Promise<void> {
    await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: { [PARTITION_KEY]: UNMAPPED_RECEIPT_KEY },
        UpdateExpression: 'SET #type = :type, webhookId = :id, receivedAt = :at ADD received :one',
        ExpressionAttributeNames: { '#type': 'type' },
        ExpressionAttributeValues: { ':type': type, ':id': webhookId, ':at': receivedAt, ':one': 1 },
      }),
    );
  }

  async recordUnprocessable(delivery: UnprocessableDelivery): Promise<void> {
    // An update, not a put: the API function's grant is GetItem and UpdateItem.
    await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: { [PARTITION_KEY]: `${UNPROCESSABLE_KEY_PREFIX}${delivery.webhookId}` },
        UpdateExpression: 'SET #partition = :partition, #sort = :at, #ttl = :ttl, entry = :entry',
        ExpressionAttributeNames: { '#partition': LIST_INDEX_PARTITION, '#sort': LIST_INDEX_SORT, '#ttl': TTL_ATTRIBUTE },
        ExpressionAttributeValues: {
          ':partition': UNPROCESSABLE_PARTITION_VALUE,
          ':at': delivery.receivedAt,
          ':ttl': Math.floor(Date.parse(delivery.receivedAt) / 1000) + UNPROCESSABLE_RETENTION_SECONDS,
          ':entry': JSON.stringify(delivery),
        },
      }),
    );
  }

  async listUnprocessable(page: { limit: number; cursor?: string }): Promise<{ decisions: UnprocessableDelivery[]; nextCursor?: string }> {
    const start = page.cursor === undefined ? undefined : cursorKey(page.cursor, UNPROCESSABLE_PARTITION_VALUE);
    const { Items = [], LastEvaluatedKey } = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        IndexName: LIST_INDEX,
        KeyConditionExpression: '#partition = :partition',
        ExpressionAttributeNames: { '#partition': LIST_INDEX_PARTITION },
        ExpressionAttributeValues: { ':partition': UNPROCESSABLE_PARTITION_VALUE },
        ScanIndexForward: false,
        Limit: page.limit,
        ...(start && { ExclusiveStartKey: start }),
      }),
    );
    return {
      decisions: Items.map((item) => JSON.parse(item.entry as string) as UnprocessableDelivery),
      ...(LastEvaluatedKey && { nextCursor: Buffer.from(JSON.stringify(LastEvaluatedKey)).toString('base64url') }),
    };
  }

  async lastUnmapped(): Promise<(UnmappedDelivery & { received: number }) | undefined> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: { [PARTITION_KEY]: UNMAPPED_RECEIPT_KEY }, ConsistentRead: true }),
    );
    if (!Item) return undefined;
    return { type: Item.type, webhookId: Item.webhookId, receivedAt: Item.receivedAt, received: Number(Item.received) };
  }
}

/** A value the document client cannot marshal is refused here, before the request, as DynamoDB would refuse it. */
function unmarshallable(values: Record<string, unknown>): void {
  try {
    marshall(values, { removeUndefinedValues: true });
  } catch (error) {
    throw new StoreRejectedError(`the record cannot be stored: ${(error as Error).message}`, { cause: error });
  }
}

/** A refusal that will not change on retry becomes StoreRejectedError; anything else passes as is (retry later). */
function classified(error: unknown): unknown {
  return isPermanentRejection(error)
    ? new StoreRejectedError(`DynamoDB refused the record: ${(error as Error).message}`, { cause: error })
    : error;
}

/** The list's filter on a current view (the read model it was found by may be behind). */
function matches(filter: ListFilter, view: OperationView): boolean {
  if (filter.state && view.state !== filter.state) return false;
  if (filter.kind && view.kind !== filter.kind) return false;
  if (filter.provider && !(PROVIDER_KINDS[filter.provider] as readonly string[]).includes(view.kind)) return false;
  if (filter.overdue && !(view.overdue && rankOf(view.state) < TERMINAL_RANK)) return false;
  return true;
}

function viewFromItem(item: Record<string, unknown>): OperationView {
  return {
    ...recordFromItem(item),
    polling: {
      nextPollAt: (item[OPEN_INDEX_SORT] as string | undefined) ?? null,
      failedPolls: (item.failedPolls as number | undefined) ?? 0,
      notFoundPolls: (item.notFoundPolls as number | undefined) ?? 0,
      note: (item.pollNote as string | undefined) ?? null,
    },
  };
}

/** The unprocessable list's cursor back to its LastEvaluatedKey; anything else is refused before DynamoDB sees it. */
function cursorKey(cursor: string, partition: string): Record<string, string> {
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString());
  } catch {
    throw new InvalidCursorError('cursor is not one this API handed out');
  }
  const fields = [PARTITION_KEY, LIST_INDEX_PARTITION, LIST_INDEX_SORT];
  const valid =
    typeof key === 'object' &&
    key !== null &&
    Object.keys(key).length === fields.length &&
    fields.every((field) => typeof (key as Record<string, unknown>)[field] === 'string') &&
    (key as Record<string, string>)[LIST_INDEX_PARTITION] === partition;
  if (!valid) throw new InvalidCursorError('cursor is not one this API handed out');
  return key as Record<string, string>;
}

/** A due job as the open-by-due-v2 index holds it. */
export interface DueJob {
  name: string;
  /** Its `nextPollAt` when read: a lease is taken only while it still is. */
  due: string;
  kind: OperationKind;
  credential?: string;
}

export interface DuePage {
  jobs: DueJob[];
  next?: Record<string, unknown>;
}

/** An item as reconcile polls it: the record, and its poll state as of `due`. */
function candidateOf(item: Record<string, unknown>, due: string): PollCandidate {
  return {
    record: recordFromItem(item),
    poll: {
      nextPollAt: due,
      unchangedPolls: (item.unchangedPolls as number | undefined) ?? 0,
      failedPolls: (item.failedPolls as number | undefined) ?? 0,
      notFoundPolls: (item.notFoundPolls as number | undefined) ?? 0,
    },
  };
}

/** The record's own attributes, in a stable order (items may carry index attributes too). */
function recordFromItem(item: Record<string, unknown>): OperationRecord {
  const record = item as unknown as OperationRecord;
  return {
    name: record.name,
    kind: record.kind,
    provider: record.provider ?? providerOf(record.kind),
    state: record.state ?? null,
    providerState: record.providerState ?? null,
    updateTime: record.updateTime ?? null,
    version: record.version,
    previousState: record.previousState ?? null,
    stateChanged: record.stateChanged ?? false,
    source: record.source,
    eventId: record.eventId ?? null,
    result: record.result ?? null,
    ...(record.userMetadata && { userMetadata: record.userMetadata }),
    ...(record.credential && { credential: record.credential }),
    ...(record.overdue && { overdue: record.overdue }),
    ...(record.resultPending && { resultPending: true }),
    ...(record.resultWrite && { resultWrite: true }),
    createdAt: record.createdAt,
    recordedAt: record.recordedAt,
  };
}
