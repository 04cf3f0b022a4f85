/** The local runtime's table setup, against DynamoDB Local. */
import { CreateTableCommand, DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createDynamoDbClient } from '../../lambda/store/dynamodb.ts';
import { createTableInput, LIST_INDEX, OPEN_INDEX } from '../../lambda/store/table.ts';
import { ensureTable } from '../../local/runtime.ts';

const client = createDynamoDbClient({ endpoint: inject('dynamodbEndpoint') });
afterAll(() => client.destroy());

describe('ensureTable', () => {
  it('adds the indexes it lacks (open-by-due, recent-by-recorded) to a table kept from an earlier version', async () => {
    const tableName = `ratchet-old-${Date.now()}`;
    const { GlobalSecondaryIndexes: _, StreamSpecification: __, AttributeDefinitions, ...old } = createTableInput(tableName);
    await client.send(
      new CreateTableCommand({ ...old, AttributeDefinitions: AttributeDefinitions?.filter((a) => a.AttributeName === 'name') }),
    );
    await ensureTable(client, createTableInput(tableName));
    await ensureTable(client, createTableInput(tableName)); // and a second start changes nothing
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    expect(Table?.GlobalSecondaryIndexes?.map((index) => index.IndexName).sort()).toEqual([OPEN_INDEX, LIST_INDEX].sort());
  });
});
