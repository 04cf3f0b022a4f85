/** Reads every record of a table's stream from TRIM_HORIZON (test inspection only), without moto's key-only INSERTs. */
import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type _Record,
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { isMotoKeyOnlyInsert } from './aws/moto.ts';

export async function readStream(client: DynamoDBClient, endpoint: string, tableName: string): Promise<_Record[]> {
  const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
  const streams = new DynamoDBStreamsClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  try {
    const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: Table?.LatestStreamArn }));
    const records: _Record[] = [];
    for (const shard of StreamDescription?.Shards ?? []) {
      let { ShardIterator: iterator } = await streams.send(
        new GetShardIteratorCommand({ StreamArn: Table?.LatestStreamArn, ShardId: shard.ShardId, ShardIteratorType: 'TRIM_HORIZON' }),
      );
      while (iterator) {
        const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
        records.push(...(page.Records ?? []).filter((record) => !isMotoKeyOnlyInsert(record)));
        iterator = page.Records?.length ? page.NextShardIterator : undefined;
      }
    }
    return records;
  } finally {
    streams.destroy();
  }
}
