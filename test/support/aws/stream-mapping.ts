/**
 * A local reader of the table's stream with a Lambda event source mapping's
 * semantics: read from TRIM_HORIZON, drop records that do not match the filter
 * criteria, hand batches to the handler in order, retry from the lowest failed
 * sequence number (ReportBatchItemFailures) with backoff and bounded attempts,
 * then write an on-failure record and go on. The local runtime uses it as the
 * effects Pipe: its handler sends each batch to the effects queue.
 *
 * Progress is checkpointed per shard in a small table of its own, so a restart
 * resumes after the last finished batch; a replay of an unfinished batch sends
 * the same queue messages again (idempotent), and the effects ledger delivers
 * nothing twice.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type Shard,
} from '@aws-sdk/client-dynamodb-streams';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { matchesFilter, STATE_CHANGE_FILTER } from '../../../lambda/effects/filter.ts';
import { isMotoKeyOnlyInsert } from './moto.ts';

/** What the mapping invokes, as Lambda would: a batch of stream records, partial failures back. */
export type StreamHandler = (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse>;

export interface StreamMappingOptions {
  client: DynamoDBClient;
  documents: DynamoDBDocumentClient;
  endpoint: string;
  tableName: string;
  /** Holds checkpoints and dead letters (`key` partition key, no stream). */
  stateTableName: string;
  handler: StreamHandler;
  /** Which records reach the handler (Lambda's filter criteria); the effects Pipe's by default. */
  filter?: Parameters<typeof matchesFilter>[0];
  logger: Logger;
  batchSize: number;
  retryAttempts: number;
  retryBaseMs: number;
  pollMs?: number;
}

const MAX_BACKOFF_MS = 60_000;

export class LocalStreamMapping {
  private readonly streams: DynamoDBStreamsClient;
  private stopped = false;
  private running?: Promise<void>;
  private wake?: () => void;

  constructor(private readonly options: StreamMappingOptions) {
    this.streams = new DynamoDBStreamsClient({
      endpoint: options.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  }

  start(): void {
    this.running = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.running;
    this.streams.destroy();
  }

  private async run(): Promise<void> {
    const { logger } = this.options;
    while (!this.stopped) {
      try {
        const { Table } = await this.options.client.send(new DescribeTableCommand({ TableName: this.options.tableName }));
        const streamArn = Table?.LatestStreamArn;
        if (!streamArn) throw new Error(`table ${this.options.tableName} has no stream`);
        const shard = await this.nextShard(streamArn);
        if (shard) await this.drain(streamArn, shard);
        else await this.sleep(this.options.pollMs ?? 250);
      } catch (error) {
        if (this.stopped) break;
        logger.error('stream mapping error; retrying', { error });
        await this.sleep(1_000);
      }
    }
  }

  /**
   * On a first start (no checkpoint in any shard): how many records passing the
   * filter the stream holds, which this mapping will hand over first (DynamoDB
   * keeps a stream's records 24 hours). Undefined when it resumes from checkpoints.
   */
  async backlog(): Promise<number | undefined> {
    const { Table } = await this.options.client.send(new DescribeTableCommand({ TableName: this.options.tableName }));
    const streamArn = Table?.LatestStreamArn;
    if (!streamArn) return undefined;
    const shards = await this.shards(streamArn);
    for (const shard of shards) if (await this.checkpoint(streamArn, shard.ShardId as string)) return undefined;
    let count = 0;
    for (const shard of shards) {
      let { ShardIterator: iterator } = await this.streams.send(
        new GetShardIteratorCommand({ StreamArn: streamArn, ShardId: shard.ShardId, ShardIteratorType: 'TRIM_HORIZON' }),
      );
      while (iterator) {
        const page = await this.streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
        count += (page.Records ?? []).filter(
          (record) => !isMotoKeyOnlyInsert(record) && matchesFilter(this.options.filter ?? STATE_CHANGE_FILTER, record),
        ).length;
        iterator = page.Records?.length ? page.NextShardIterator : undefined;
      }
    }
    return count;
  }

  /** The oldest shard not read to its end (a parent closes before its child starts). */
  private async nextShard(streamArn: string): Promise<Shard | undefined> {
    for (const shard of await this.shards(streamArn)) {
      const checkpoint = await this.checkpoint(streamArn, shard.ShardId as string);
      if (!checkpoint?.complete) return shard;
    }
    return undefined;
  }

  /** Every shard of the stream, oldest first. */
  private async shards(streamArn: string): Promise<Shard[]> {
    const shards: Shard[] = [];
    let exclusiveStartShardId: string | undefined;
    do {
      const { StreamDescription } = await this.streams.send(
        new DescribeStreamCommand({ StreamArn: streamArn, ExclusiveStartShardId: exclusiveStartShardId }),
      );
      shards.push(...(StreamDescription?.Shards ?? []));
      exclusiveStartShardId = StreamDescription?.LastEvaluatedShardId;
    } while (exclusiveStartShardId);
    shards.sort((a, b) => compareSequence(a.SequenceNumberRange?.StartingSequenceNumber, b.SequenceNumberRange?.StartingSequenceNumber));
    return shards;
  }

  private async drain(streamArn: string, shard: Shard): Promise<void> {
    const shardId = shard.ShardId as string;
    const checkpoint = await this.checkpoint(streamArn, shardId);
    let position = checkpoint?.sequenceNumber;
    let { ShardIterator: iterator } = await this.streams.send(
      new GetShardIteratorCommand({
        StreamArn: streamArn,
        ShardId: shardId,
        ...(position ? { ShardIteratorType: 'AFTER_SEQUENCE_NUMBER', SequenceNumber: position } : { ShardIteratorType: 'TRIM_HORIZON' }),
      }),
    );
    while (iterator && !this.stopped) {
      const page = await this.streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
      const records = page.Records ?? [];
      const passes = records.map(
        (record) => !isMotoKeyOnlyInsert(record) && matchesFilter(this.options.filter ?? STATE_CHANGE_FILTER, record),
      );
      for (let start = 0; start < records.length && !this.stopped; ) {
        // A chunk ends after `batchSize` records that pass the filter; the ones it drops are passed over in it.
        let end = start;
        for (let matching = 0; end < records.length && matching < this.options.batchSize; end++) if (passes[end]) matching++;
        const chunk = records.slice(start, end);
        const batch = chunk.filter((_, i) => passes[start + i]).map((r) => toLambdaRecord(r, streamArn));
        if (batch.length > 0 && !(await this.invoke(streamArn, batch))) return; // stopped mid-retry: resume here next start
        position = chunk.at(-1)?.dynamodb?.SequenceNumber;
        await this.saveCheckpoint(streamArn, shardId, { sequenceNumber: position });
        start = end;
      }
      iterator = page.NextShardIterator;
      if (!iterator) await this.saveCheckpoint(streamArn, shardId, { sequenceNumber: position, complete: true });
      else if (records.length === 0) await this.sleep(this.options.pollMs ?? 250);
    }
  }

  /** Invokes the handler until the batch succeeds or goes to the dead-letter store; false if stopped first. */
  private async invoke(streamArn: string, batch: DynamoDBRecord[]): Promise<boolean> {
    const { handler, logger, retryAttempts, retryBaseMs } = this.options;
    let pending = batch;
    for (let retry = 0; ; retry++) {
      let failedFrom: string | undefined;
      try {
        const { batchItemFailures } = await handler({ Records: pending });
        failedFrom = batchItemFailures.map((f) => f.itemIdentifier).sort(compareSequence)[0];
      } catch (error) {
        logger.error('effects handler threw; the whole batch failed', { error });
        failedFrom = pending[0]?.dynamodb?.SequenceNumber;
      }
      if (failedFrom === undefined) return true;
      pending = pending.filter((r) => compareSequence(r.dynamodb?.SequenceNumber, failedFrom) >= 0);
      if (retry >= retryAttempts) {
        await this.deadLetter(streamArn, pending, retry + 1);
        return true;
      }
      await this.sleep(Math.min(MAX_BACKOFF_MS, retryBaseMs * 2 ** retry));
      if (this.stopped) return false;
    }
  }

  private async deadLetter(streamArn: string, records: DynamoDBRecord[], attempts: number): Promise<void> {
    const first = records[0]?.dynamodb?.SequenceNumber;
    const last = records.at(-1)?.dynamodb?.SequenceNumber;
    await this.options.documents.send(
      new PutCommand({
        TableName: this.options.stateTableName,
        Item: {
          key: `dead-letter#${streamArn}#${first}`,
          streamArn,
          firstSequenceNumber: first,
          lastSequenceNumber: last,
          attempts,
          records,
          at: new Date().toISOString(),
        },
      }),
    );
    this.options.logger.error('effects batch dead-lettered after its retries', {
      streamArn,
      firstSequenceNumber: first,
      lastSequenceNumber: last,
      attempts,
    });
  }

  private async checkpoint(streamArn: string, shardId: string): Promise<{ sequenceNumber?: string; complete?: boolean } | undefined> {
    const { Item } = await this.options.documents.send(
      new GetCommand({ TableName: this.options.stateTableName, Key: { key: `checkpoint#${streamArn}#${shardId}` }, ConsistentRead: true }),
    );
    return Item as { sequenceNumber?: string; complete?: boolean } | undefined;
  }

  private async saveCheckpoint(streamArn: string, shardId: string, state: { sequenceNumber?: string; complete?: boolean }): Promise<void> {
    await this.options.documents.send(
      new PutCommand({ TableName: this.options.stateTableName, Item: { key: `checkpoint#${streamArn}#${shardId}`, ...state } }),
    );
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** Sequence numbers are decimal strings of varying length. */
function compareSequence(a: string | undefined, b: string | undefined): number {
  const x = BigInt(a ?? 0);
  const y = BigInt(b ?? 0);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The record as Lambda hands it over: with the stream ARN, times in epoch seconds, empty maps as `{"M":{}}`. */
export function toLambdaRecord(record: _Record, streamArn: string): DynamoDBRecord {
  const created = record.dynamodb?.ApproximateCreationDateTime;
  const { Keys, NewImage, OldImage } = record.dynamodb ?? {};
  return {
    ...record,
    eventSourceARN: streamArn,
    dynamodb: {
      ...record.dynamodb,
      ...(Keys && { Keys: restoreEmptyMaps(Keys) }),
      ...(NewImage && { NewImage: restoreEmptyMaps(NewImage) }),
      ...(OldImage && { OldImage: restoreEmptyMaps(OldImage) }),
      ApproximateCreationDateTime: created ? Math.floor(created.getTime() / 1000) : undefined,
    },
  } as DynamoDBRecord;
}

type Attribute = { M?: Record<string, Attribute>; L?: Attribute[] } & Record<string, unknown>;

/**
 * The DynamoDB Streams client decodes an empty map `{"M":{}}` into `{}` (no
 * type at all), which `unmarshall` cannot read; Lambda's event has `{"M":{}}`.
 * An attribute with no type can only have been an empty map.
 */
function restoreEmptyMaps(image: Record<string, unknown>): Record<string, Attribute> {
  const restore = (value: Attribute): Attribute => {
    if (Object.keys(value).length === 0) return { M: {} };
    if (value.M) return { M: restoreEmptyMaps(value.M) };
    if (value.L) return { L: value.L.map(restore) };
    return value;
  };
  return Object.fromEntries(Object.entries(image).map(([key, value]) => [key, restore(value as Attribute)]));
}
