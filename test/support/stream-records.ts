/** A table's stream on moto, read for inspection (tests and the cost bench), without moto's key-only INSERTs. */
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { isMotoKeyOnlyInsert, MOTO_CREDENTIALS, MOTO_REGION } from './aws/moto.ts';

/** Reads a table's stream in turns, from its start (TRIM_HORIZON): each `read` gives what was written since the last. */
export class StreamReader {
  private readonly client: DynamoDBStreamsClient;
  /** Each shard's next iterator (kept after an empty page: the shard is open, written again later). */
  private readonly iterators = new Map<string, string | undefined>();

  private constructor(endpoint: string) {
    this.client = new DynamoDBStreamsClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  }

  /** `tableName`'s stream, looked up with `dynamodb` (a client of this endpoint's own when none is given). */
  static async open(endpoint: string, tableName: string, dynamodb?: DynamoDBClient): Promise<StreamReader> {
    const reader = new StreamReader(endpoint);
    const tables = dynamodb ?? new DynamoDBClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
    try {
      const { Table } = await tables.send(new DescribeTableCommand({ TableName: tableName }));
      const arn = Table?.LatestStreamArn;
      const { StreamDescription } = await reader.client.send(new DescribeStreamCommand({ StreamArn: arn }));
      for (const shard of StreamDescription?.Shards ?? []) {
        const { ShardIterator } = await reader.client.send(
          new GetShardIteratorCommand({ StreamArn: arn, ShardId: shard.ShardId, ShardIteratorType: 'TRIM_HORIZON' }),
        );
        reader.iterators.set(shard.ShardId as string, ShardIterator);
      }
      return reader;
    } catch (error) {
      reader.close();
      throw error;
    } finally {
      if (!dynamodb) tables.destroy();
    }
  }

  /** The records written since the last read (the first: since the stream began). */
  async read(): Promise<_Record[]> {
    const records: _Record[] = [];
    for (const [shard, iterator] of this.iterators) {
      let at = iterator;
      while (at) {
        const page = await this.client.send(new GetRecordsCommand({ ShardIterator: at, Limit: 1000 }));
        records.push(...(page.Records ?? []).filter((record) => !isMotoKeyOnlyInsert(record)));
        at = page.NextShardIterator;
        if ((page.Records ?? []).length === 0) break;
      }
      this.iterators.set(shard, at);
    }
    return records;
  }

  close(): void {
    this.client.destroy();
  }
}

/** Every record of a table's stream so far. */
export async function readStream(client: DynamoDBClient, endpoint: string, tableName: string): Promise<_Record[]> {
  const reader = await StreamReader.open(endpoint, tableName, client);
  try {
    return await reader.read();
  } finally {
    reader.close();
  }
}
