import type { TestProject } from 'vitest/node';
import { createDynamoDbClient, createTableInput } from '../../engines/dynamodb/index.ts';
import { startMoto } from './aws/moto.ts';
import { ensureTable } from './aws/tables.ts';

export const TEST_TABLE = 'ratchet-test-operations';

export default async function setup(project: TestProject) {
  const db = await startMoto();
  const client = createDynamoDbClient({ endpoint: db.endpoint });
  await ensureTable(client, createTableInput(TEST_TABLE));
  client.destroy();
  project.provide('dynamodbEndpoint', db.endpoint);
  project.provide('tableName', TEST_TABLE);
  return () => db.stop();
}

declare module 'vitest' {
  export interface ProvidedContext {
    dynamodbEndpoint: string;
    tableName: string;
  }
}
