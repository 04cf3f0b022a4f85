/**
 * The whole system on one machine: DynamoDB Local (embedded, or the one at
 * DYNAMODB_ENDPOINT), the table with its stream as in AWS, and the HTTP API
 * served through the same handler code as the Lambda.
 */
import { randomBytes } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { CreateTableCommand, type DynamoDBClient, ResourceInUseException, waitUntilTableExists } from '@aws-sdk/client-dynamodb';
import { serve } from '@hono/node-server';
import type { Config } from '../lambda/config.ts';
import { createApp } from '../lambda/http/app.ts';
import { parseSigningSecrets, WebhookSignatureVerifier } from '../lambda/http/webhook-signature.ts';
import { createLogger, createMetrics } from '../lambda/logger.ts';
import { createDocumentClient, createDynamoDbClient } from '../lambda/store/dynamodb.ts';
import { DynamoDbOperationStore } from '../lambda/store/dynamodb-operation-store.ts';
import { createTableInput } from '../lambda/store/table.ts';
import { type EmbeddedDynamoDb, startDynamoDbLocal } from './dynamodb-local.ts';

export const DEFAULT_DATA_DIR = resolve(import.meta.dirname, '..', '.ratchet-data');
export const IN_MEMORY = ':memory:';

export interface LocalRuntime {
  url: string;
  dynamodbEndpoint: string;
  /** Set when no WEBHOOK_SIGNING_SECRETS was configured: the generated development secret. */
  devSecret?: string;
  stop(): Promise<void>;
}

export async function startLocalRuntime(config: Config): Promise<LocalRuntime> {
  const logger = createLogger();
  const devSecret = config.WEBHOOK_SIGNING_SECRETS ? undefined : `whsec_${randomBytes(24).toString('base64')}`;
  const secrets = parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS ?? (devSecret as string));

  const dataDir = config.DATA_DIR ?? DEFAULT_DATA_DIR;
  let embedded: EmbeddedDynamoDb | undefined;
  if (!config.DYNAMODB_ENDPOINT) embedded = await startDynamoDbLocal({ dataDir: dataDir === IN_MEMORY ? undefined : dataDir });
  const dynamodbEndpoint = config.DYNAMODB_ENDPOINT ?? (embedded as EmbeddedDynamoDb).endpoint;
  const client = createDynamoDbClient({ endpoint: dynamodbEndpoint });
  const stopped: Array<() => unknown> = [() => client.destroy(), () => embedded?.stop()];
  const stop = async () => {
    for (const step of stopped.splice(0).reverse()) await step();
  };
  try {
    await ensureTable(client, config.TABLE_NAME);
    const store = new DynamoDbOperationStore(createDocumentClient(client), config.TABLE_NAME);
    const app = createApp({ store, verifier: new WebhookSignatureVerifier(async () => secrets), logger, metrics: createMetrics() });
    const server = await listen(app.fetch, config.HOST, config.PORT);
    stopped.push(
      () =>
        new Promise<void>((done) => {
          server.close(() => done());
          (server as Server).closeAllConnections();
        }),
    );
    const { port } = server.address() as AddressInfo;
    const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
    return { url: `http://${host}:${port}`, dynamodbEndpoint, devSecret, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Creates the table as the stack does (stream NEW_AND_OLD_IMAGES); an existing one is kept. */
export async function ensureTable(client: DynamoDBClient, tableName: string): Promise<void> {
  try {
    await client.send(new CreateTableCommand(createTableInput(tableName)));
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  await waitUntilTableExists({ client, maxWaitTime: 30, minDelay: 1 }, { TableName: tableName });
}

function listen(fetch: Parameters<typeof serve>[0]['fetch'], hostname: string, port: number) {
  return new Promise<ReturnType<typeof serve>>((resolveServer, reject) => {
    const server = serve({ fetch, hostname, port }, () => resolveServer(server));
    server.once('error', reject);
  });
}
