/**
 * The whole system on one machine: DynamoDB Local (embedded, or the one at
 * DYNAMODB_ENDPOINT), the table with its stream and index as in AWS, the HTTP
 * API served through the same handler code as the Lambda, the stream ->
 * effects mapping, and the reconcile schedule.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import type { Logger } from '@aws-lambda-powertools/logger';
import {
  CreateTableCommand,
  type CreateTableCommandInput,
  DescribeTableCommand,
  type DynamoDBClient,
  ListTablesCommand,
  ResourceInUseException,
  UpdateTableCommand,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { serve } from '@hono/node-server';
import type { Hono, MiddlewareHandler } from 'hono';
import { z } from 'zod';
import type { Config } from '../lambda/config.ts';
import { ConfigError } from '../lambda/config.ts';
import { DynamoDbDeadLetters, deadLetterTableInput } from '../lambda/effects/dead-letters.ts';
import { DynamoDbEffectLedger, keyedTableInput } from '../lambda/effects/ledger.ts';
import { createEffectsHandler } from '../lambda/effects/process.ts';
import { redrive } from '../lambda/effects/redrive.ts';
import { EFFECTS_PIPE, retrySettings } from '../lambda/effects/settings.ts';
import { WebhookSink } from '../lambda/effects/sinks.ts';
import { createHistoryHandler, DynamoDbHistory, HISTORY_FILTER, HISTORY_MAPPING, historyTableInput } from '../lambda/history/history.ts';
import { createApp, type Failure } from '../lambda/http/app.ts';
import { dynamicWebhooks, parseSigningSecrets, WebhookSignatureVerifier } from '../lambda/http/webhook-signature.ts';
import { createLogger, createMetrics } from '../lambda/logger.ts';
import { GenAiPoller } from '../lambda/reconcile/gemini-poller.ts';
import { pollNow } from '../lambda/reconcile/poll-now.ts';
import { reconcile } from '../lambda/reconcile/reconcile.ts';
import { WebhookHealth } from '../lambda/reconcile/webhook-health.ts';
import { createDocumentClient, createDynamoDbClient } from '../lambda/store/dynamodb.ts';
import { DynamoDbOperationStore } from '../lambda/store/dynamodb-operation-store.ts';
import { createTableInput } from '../lambda/store/table.ts';
import { consoleRoutes } from './console.ts';
import { type EmbeddedDynamoDb, startDynamoDbLocal } from './dynamodb-local.ts';
import { LocalEffectsQueue, queueTableInput } from './effects-queue.ts';
import { LocalSchedule } from './schedule.ts';
import { LocalStreamMapping } from './stream-mapping.ts';

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
  const dataDir = config.DATA_DIR ?? DEFAULT_DATA_DIR;
  const devSecret = config.WEBHOOK_SIGNING_SECRETS ? undefined : developmentSecret(dataDir);
  const secrets = parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS ?? (devSecret as string));

  // Every table this runtime uses, so a restarted in-memory DynamoDB Local gets them back.
  const tables: CreateTableCommandInput[] = [];
  let client: DynamoDBClient | undefined;
  const restoreTables = async () => {
    for (const table of tables) await ensureTable(client as DynamoDBClient, table);
  };
  let embedded: EmbeddedDynamoDb | undefined;
  if (!config.DYNAMODB_ENDPOINT) {
    embedded = await startDynamoDbLocal({
      dataDir: dataDir === IN_MEMORY ? undefined : dataDir,
      supervise: { logger, onRestarted: restoreTables },
    });
  }
  const dynamodbEndpoint = config.DYNAMODB_ENDPOINT ?? (embedded as EmbeddedDynamoDb).endpoint;
  client = createDynamoDbClient({ endpoint: dynamodbEndpoint });
  const probe = storeProbe(dynamodbEndpoint);
  const stopped: Array<() => unknown> = [() => client.destroy(), () => probe.close(), () => embedded?.stop()];
  const stop = async () => {
    for (const step of stopped.splice(0).reverse()) await step();
  };
  const ensure = async (input: CreateTableCommandInput) => {
    tables.push(input);
    await ensureTable(client, input);
  };
  try {
    await ensure(createTableInput(config.TABLE_NAME));
    const documents = createDocumentClient(client);
    const store = new DynamoDbOperationStore(documents, config.TABLE_NAME);
    // CloudWatch EMF lines are for AWS: locally only when asked for with POWERTOOLS_METRICS_DISABLED=false.
    const metrics = process.env.POWERTOOLS_METRICS_DISABLED === 'false' ? createMetrics() : undefined;
    const history = new DynamoDbHistory(documents, config.HISTORY_TABLE ?? `${config.TABLE_NAME}-history`, config.HISTORY_RETENTION_DAYS);
    await ensure(historyTableInput(config.HISTORY_TABLE ?? `${config.TABLE_NAME}-history`));
    let effects: LocalEffects | undefined;
    let schedule: LocalSchedule | undefined;
    const app = createApp({
      store,
      queries: store,
      history,
      receipts: store,
      verifier: new WebhookSignatureVerifier(async () => secrets, dynamicWebhooks(config)),
      pollNow: config.GEMINI_API_KEY ? (operation) => pollNow(operation, { store, wake: async () => schedule?.runSoon() }) : undefined,
      logger,
      metrics,
      health: probe.check,
      extraRoutes: (routes, { sameOriginJson, fail }) => {
        effectsAdminRoutes(routes, { sameOriginJson, fail, effects: () => effects });
        consoleRoutes(routes, { queries: store, history, effects: () => effects });
      },
    });
    const server = await listen(app.fetch, config.HOST, config.PORT);
    stopped.push(
      () =>
        new Promise<void>((done) => {
          server.close(() => done());
          (server as Server).closeAllConnections();
        }),
    );
    const historyMapping = await startHistory(config, { client, documents, endpoint: dynamodbEndpoint, logger, ensure, history });
    stopped.push(() => historyMapping.stop());
    effects = await startEffects(config, { client, documents, endpoint: dynamodbEndpoint, logger, ensure });
    if (effects) stopped.push(() => effects.stop());
    schedule = startReconcile(config, store, logger);
    if (schedule) stopped.push(() => schedule?.stop());
    const { port } = server.address() as AddressInfo;
    const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
    return { url: `http://${host}:${port}`, dynamodbEndpoint, devSecret, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

export const DEV_SECRET_FILE = 'dev-webhook-secret';

/**
 * The development secret, kept beside the data it signs for (`DATA_DIR`, owner
 * read-only), so the one exported a minute ago still works after a restart. A
 * new one each start with `:memory:`, or if the file does not hold one.
 */
function developmentSecret(dataDir: string): string {
  const fresh = `whsec_${randomBytes(24).toString('base64')}`;
  if (dataDir === IN_MEMORY) return fresh;
  const file = join(dataDir, DEV_SECRET_FILE);
  if (existsSync(file)) {
    const kept = readFileSync(file, 'utf8').trim();
    try {
      parseSigningSecrets(kept);
      return kept;
    } catch {
      // not a secret (edited by hand?): replaced below
    }
  }
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(file, `${fresh}\n`, { mode: 0o600 });
  return fresh;
}

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

/** Reconcile every RECONCILE_INTERVAL_SECONDS, as the stack's schedule does, through the same ingest. */
function startReconcile(config: Config, store: DynamoDbOperationStore, logger: Logger): LocalSchedule | undefined {
  if (!config.GEMINI_API_KEY) {
    logger.warn('reconcile off: GEMINI_API_KEY is not set (webhooks still work; nothing is polled)');
    return undefined;
  }
  const poller = new GenAiPoller({ apiKey: config.GEMINI_API_KEY, baseUrl: config.GEMINI_BASE_URL });
  const health = new WebhookHealth({ webhooks: poller.webhooks, webhookUrl: config.WEBHOOK_URL, logger });
  const periodMs = config.RECONCILE_INTERVAL_SECONDS * 1000;
  const schedule = new LocalSchedule(
    periodMs,
    () => reconcile({ store, poller, health, logger, intervalSeconds: config.RECONCILE_INTERVAL_SECONDS, budgetMs: periodMs * 0.8 }),
    logger,
  );
  schedule.start();
  return schedule;
}

/** What a consumer of the table's stream needs from the runtime. */
interface StreamConsumerDeps {
  client: DynamoDBClient;
  documents: DynamoDBDocumentClient;
  endpoint: string;
  logger: Logger;
  /** Creates a table (and remembers it, for an in-memory DynamoDB Local that restarts). */
  ensure: (input: CreateTableCommandInput) => Promise<void>;
}

/**
 * History, as in AWS: the table's stream (every applied write) -> the history
 * writer, through a stream mapping of its own (its own checkpoints), sink or no sink.
 */
async function startHistory(config: Config, deps: StreamConsumerDeps & { history: DynamoDbHistory }): Promise<LocalStreamMapping> {
  const stateTable = `${config.TABLE_NAME}-history-mapping`;
  await deps.ensure(keyedTableInput(stateTable));
  const mapping = new LocalStreamMapping({
    ...deps,
    tableName: config.TABLE_NAME,
    stateTableName: stateTable,
    filter: HISTORY_FILTER,
    handler: createHistoryHandler({ history: deps.history, logger: deps.logger }),
    batchSize: HISTORY_MAPPING.batchSize,
    retryAttempts: HISTORY_MAPPING.retryAttempts,
    retryBaseMs: 1_000,
    pollMs: 100,
  });
  mapping.start();
  return mapping;
}

export interface LocalEffects {
  deadLetters: DynamoDbDeadLetters;
  queue: LocalEffectsQueue;
  ledger: DynamoDbEffectLedger;
  stop(): Promise<void>;
}

/**
 * The effects path, as in AWS: the table's stream -> (the local Pipe: the
 * stream mapping, filtered to state changes) -> the per-operation effects
 * queue -> the effects handler -> the outbound webhook.
 */
async function startEffects(config: Config, deps: StreamConsumerDeps): Promise<LocalEffects | undefined> {
  if (!config.EFFECTS_WEBHOOK_URL) {
    deps.logger.info('effects off: EFFECTS_WEBHOOK_URL is not set');
    return undefined;
  }
  if (!config.EFFECTS_SIGNING_SECRET) throw new ConfigError('EFFECTS_WEBHOOK_URL needs EFFECTS_SIGNING_SECRET (whsec_...)');
  const [secret] = parseSigningSecrets(config.EFFECTS_SIGNING_SECRET);
  const ledgerTable = config.EFFECTS_LEDGER_TABLE ?? `${config.TABLE_NAME}-effects-ledger`;
  const deadLetterTable = config.EFFECTS_DEAD_LETTER_TABLE ?? `${config.TABLE_NAME}-effects-dead-letters`;
  const stateTable = `${config.TABLE_NAME}-stream-mapping`;
  const queueTable = `${config.TABLE_NAME}-effects-queue`;
  await deps.ensure(keyedTableInput(ledgerTable));
  await deps.ensure(deadLetterTableInput(deadLetterTable));
  await deps.ensure(keyedTableInput(stateTable));
  await deps.ensure(queueTableInput(queueTable));
  const deadLetters = new DynamoDbDeadLetters(deps.documents, deadLetterTable);
  const queue = new LocalEffectsQueue({ documents: deps.documents, tableName: queueTable, logger: deps.logger });
  const ledger = new DynamoDbEffectLedger(deps.documents, ledgerTable);
  await queue.start(
    createEffectsHandler({
      sinks: [new WebhookSink(config.EFFECTS_WEBHOOK_URL, secret as string, { timeoutMs: config.EFFECTS_WEBHOOK_TIMEOUT_MS })],
      ledger,
      deadLetters,
      queue,
      retry: retrySettings(config),
      logger: deps.logger,
    }),
  );
  const pipe = new LocalStreamMapping({
    ...deps,
    tableName: config.TABLE_NAME,
    stateTableName: stateTable,
    handler: async (event) => {
      await queue.send(event.Records);
      return { batchItemFailures: [] };
    },
    batchSize: EFFECTS_PIPE.batchSize,
    // Only a store outage fails a send: retried (1 s doubling to 60 s) until the store is back.
    retryAttempts: EFFECTS_PIPE.retryAttempts,
    retryBaseMs: 1_000,
    // How long an idle stream waits before asking again: most of the local effect lag.
    pollMs: 100,
  });
  const backlog = await pipe.backlog();
  if (backlog !== undefined) {
    deps.logger.warn(
      `outbound sink: first start: the ${backlog} state change(s) still in the table's stream (it keeps 24 h) are delivered first, then new ones`,
      { backlog },
    );
  }
  pipe.start();
  return {
    deadLetters,
    queue,
    ledger,
    stop: async () => {
      await pipe.stop();
      await queue.stop();
    },
  };
}

const RedriveRequest = z.object({ name: z.string().optional(), skip: z.string().optional() });

/** The local runtime's effects admin: list the dead letters, re-drive them (what `npm run redrive` calls). */
function effectsAdminRoutes(
  app: Hono,
  deps: {
    sameOriginJson: MiddlewareHandler;
    fail: (failure: Failure, message: string) => Response;
    effects: () => LocalEffects | undefined;
  },
): void {
  app.get('/effects/dead-letters', async (c) => {
    const effects = deps.effects();
    if (!effects) return deps.fail('not-found', 'effects are off (EFFECTS_WEBHOOK_URL is not set)');
    return c.json({ deadLetters: await effects.deadLetters.list(), undecodable: await effects.deadLetters.listUndecodable() });
  });
  app.post('/effects/redrive', deps.sameOriginJson, async (c) => {
    const effects = deps.effects();
    if (!effects) return deps.fail('not-found', 'effects are off (EFFECTS_WEBHOOK_URL is not set)');
    const request = RedriveRequest.safeParse(await c.req.json().catch(() => undefined));
    if (!request.success) return deps.fail('malformed-request', 'body must be {"name"?: "<operation>", "skip"?: "<name>#<version>"}');
    const result = await redrive(
      effects.deadLetters,
      (letter) => effects.queue.send([JSON.parse(letter.record)], { redriven: true }),
      request.data,
    );
    return c.json(result);
  });
}

/**
 * Whether the store answers: one ListTables with a 1 s timeout and no retries,
 * at most once a second however often `/healthz` is asked.
 */
function storeProbe(endpoint: string) {
  const client = createDynamoDbClient({ endpoint, requestTimeoutMs: 1_000, maxAttempts: 1 });
  let last: { at: number; answer: Promise<'ok' | 'unavailable'> } | undefined;
  const ask = () =>
    client.send(new ListTablesCommand({ Limit: 1 })).then(
      () => 'ok' as const,
      () => 'unavailable' as const,
    );
  return {
    check: (): Promise<'ok' | 'unavailable'> => {
      if (!last || Date.now() - last.at > 1_000) last = { at: Date.now(), answer: ask() };
      return last.answer;
    },
    close: () => client.destroy(),
  };
}

function listen(fetch: Parameters<typeof serve>[0]['fetch'], hostname: string, port: number) {
  return new Promise<ReturnType<typeof serve>>((resolveServer, reject) => {
    const server = serve({ fetch, hostname, port }, () => resolveServer(server));
    server.once('error', reject);
  });
}
