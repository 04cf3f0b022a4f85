/**
 * Tables on moto for the AWS-path tests, described as the stack
 * describes them (engines/dynamodb/tables.ts; their CreateTable requests are table-inputs.ts's).
 */
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  ResourceInUseException,
  UpdateTableCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';

/**
 * Creates a table as the stack does. An existing one (a data folder from an
 * earlier version) is kept, and gets any index it lacks.
 */
export async function ensureTable(client: DynamoDBClient, input: CreateTableCommandInput): Promise<void> {
  try {
    await client.send(new CreateTableCommand(input));
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
    const { Table } = await client.send(new DescribeTableCommand({ TableName: input.TableName }));
    const present = new Set((Table?.GlobalSecondaryIndexes ?? []).map((index) => index.IndexName));
    for (const index of input.GlobalSecondaryIndexes ?? []) {
      if (present.has(index.IndexName)) continue;
      // DynamoDB builds one new index at a time on a table: wait out the one before.
      await indexesActive(client, input.TableName as string);
      await client.send(
        new UpdateTableCommand({
          TableName: input.TableName,
          AttributeDefinitions: input.AttributeDefinitions,
          GlobalSecondaryIndexUpdates: [
            { Create: { IndexName: index.IndexName, KeySchema: index.KeySchema, Projection: index.Projection } },
          ],
        }),
      );
    }
  }
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: input.TableName });
  await indexesActive(client, input.TableName as string);
}

async function indexesActive(client: DynamoDBClient, tableName: string): Promise<void> {
  for (let waited = 0; ; waited += 200) {
    const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
    if ((Table?.GlobalSecondaryIndexes ?? []).every((index) => index.IndexStatus === 'ACTIVE')) return;
    if (waited > 60_000) throw new Error(`table ${tableName}: its indexes are not active after a minute`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
