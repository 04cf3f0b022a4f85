/**
 * Where moto (5.2.1), which the AWS-path tests run against, differs from
 * DynamoDB and SQS, each pinned: if moto changes, the test fails and the workaround it
 * names can go.
 */
import { DescribeTableCommand, PutItemCommand, UpdateItemCommand } from '@aws-sdk/client-dynamodb';
import { DescribeStreamCommand, DynamoDBStreamsClient, GetRecordsCommand, GetShardIteratorCommand } from '@aws-sdk/client-dynamodb-streams';
import {
  ChangeMessageVisibilityCommand,
  CreateQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createDynamoDbClient } from '../../engines/dynamodb/client.ts';
import { isMotoKeyOnlyInsert, MOTO_CREDENTIALS, MOTO_REGION } from '../support/aws/moto.ts';
import { readStream } from '../support/stream-records.ts';

const endpoint = inject('dynamodbEndpoint');
const tableName = inject('tableName');
const client = createDynamoDbClient({ endpoint });
afterAll(() => client.destroy());
const run = Date.now();

/** Every record of the stream, moto's key-only INSERTs included. */
async function rawStream() {
  const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
  const streams = new DynamoDBStreamsClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: Table?.LatestStreamArn }));
  const records = [];
  for (const shard of StreamDescription?.Shards ?? []) {
    let { ShardIterator: iterator } = await streams.send(
      new GetShardIteratorCommand({ StreamArn: Table?.LatestStreamArn, ShardId: shard.ShardId, ShardIteratorType: 'TRIM_HORIZON' }),
    );
    while (iterator) {
      const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator, Limit: 1000 }));
      records.push(...(page.Records ?? []));
      iterator = page.Records?.length ? page.NextShardIterator : undefined;
    }
  }
  streams.destroy();
  return records;
}

describe('moto quirks', () => {
  it('an UpdateItem that creates an item streams a key-only INSERT before the real one (the readers pass over it)', async () => {
    const name = `batches/quirk-insert-${run}`;
    await client.send(
      new UpdateItemCommand({
        TableName: tableName,
        Key: { name: { S: name } },
        UpdateExpression: 'SET version = :v',
        ConditionExpression: 'attribute_not_exists(#n)',
        ExpressionAttributeNames: { '#n': 'name' },
        ExpressionAttributeValues: { ':v': { N: '1' } },
      }),
    );
    await client.send(new PutItemCommand({ TableName: tableName, Item: { name: { S: `${name}-put` }, version: { N: '1' } } }));
    const raw = (await rawStream()).filter((r) => r.dynamodb?.Keys?.name?.S?.startsWith(name));
    expect(
      raw.map((r) => [
        r.eventName,
        Object.keys(r.dynamodb?.NewImage ?? {})
          .sort()
          .join(','),
      ]),
    ).toEqual([
      ['INSERT', 'name'], // moto only: DynamoDB streams one INSERT for this write
      ['INSERT', 'name,version'],
      ['INSERT', 'name,version'], // a PutItem streams once
    ]);
    expect(raw.map(isMotoKeyOnlyInsert)).toEqual([true, false, false]);
    const read = (await readStream(client, endpoint, tableName)).filter((r) => r.dynamodb?.Keys?.name?.S?.startsWith(name));
    expect(read).toHaveLength(2);
  });

  it("refuses a number outside DynamoDB's range in a PutItem, but not in an UpdateItem's values (DynamoDB refuses both)", async () => {
    const name = `batches/quirk-number-${run}`;
    const outcome = (request: Promise<unknown>) =>
      request.then(
        () => 'accepted',
        (error: Error) => error.name,
      );
    const put = (value: string) =>
      outcome(client.send(new PutItemCommand({ TableName: tableName, Item: { name: { S: name }, n: { N: value } } })));
    const update = (value: string) =>
      outcome(
        client.send(
          new UpdateItemCommand({
            TableName: tableName,
            Key: { name: { S: name } },
            UpdateExpression: 'SET n = :n',
            ExpressionAttributeValues: { ':n': { N: value } },
          }),
        ),
      );
    expect([await put('1e-200'), await put('1e200')]).toEqual(['ValidationException', 'ValidationException']);
    expect([await update('1e-200'), await update('1e200')]).toEqual(['accepted', 'accepted']); // moto only
  });

  it('SQS FIFO: two messages of one group visible again together come back second first (SQS keeps group order)', async () => {
    // moto drops the first from its in-flight set and, the second still in it, skips the group; the second then
    // goes out alone. The effects handler never makes a group's messages visible together: the rest of a group
    // behind a failed message goes back at once, while the failed one waits out its backoff (lambda/effects/process.ts).
    const sqs = new SQSClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
    const { QueueUrl } = await sqs.send(
      new CreateQueueCommand({ QueueName: `quirk-${run}.fifo`, Attributes: { FifoQueue: 'true', VisibilityTimeout: '360' } }),
    );
    for (const body of ['first', 'second'])
      await sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: body, MessageGroupId: 'g', MessageDeduplicationId: body }));
    const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
    expect(Messages.map((m) => m.Body)).toEqual(['first', 'second']);
    for (const message of Messages)
      await sqs.send(new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: message.ReceiptHandle, VisibilityTimeout: 1 }));
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const again = await sqs.send(new ReceiveMessageCommand({ QueueUrl, MaxNumberOfMessages: 10 }));
    expect(again.Messages?.map((m) => m.Body)).toEqual(['second']);
    sqs.destroy();
  });
});
