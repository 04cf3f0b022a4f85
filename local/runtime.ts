/**
 * The whole system on one machine, wired: the embedded engine (one SQLite
 * file in DATA_DIR: the operations, their outbox, history, the effects queue),
 * the HTTP API served through the same handler code as the Lambda, the
 * outbox feed to history and the effects queue, and the reconcile schedule.
 * Each part lives in local/engine; this file only connects them.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Logger } from '@aws-lambda-powertools/logger';
import { serve } from '@hono/node-server';
import type { Hono, MiddlewareHandler } from 'hono';
import * as z from 'zod/mini';
import type { Config } from '../lambda/config.ts';
import { ConfigError, publicUrls } from '../lambda/config.ts';
import { createEffectsHandler } from '../lambda/effects/process.ts';
import { redrive } from '../lambda/effects/redrive.ts';
import { retrySettings } from '../lambda/effects/settings.ts';
import { WebhookSink } from '../lambda/effects/webhook-sink.ts';
import { createApp } from '../lambda/http/app.ts';
import type { Failure } from '../lambda/http/webhook.ts';
import { dynamicWebhooks, parseSigningSecrets, WebhookSignatureVerifier } from '../lambda/http/webhook-signature.ts';
import { createLogger, createMetrics } from '../lambda/logger.ts';
import { BatchDiscovery } from '../lambda/reconcile/discovery.ts';
import { pollNow } from '../lambda/reconcile/poll-now.ts';
import { reconcile } from '../lambda/reconcile/reconcile.ts';
import { WebhookHealth } from '../lambda/reconcile/webhook-health.ts';
import { type ApiTokens, resolveApiTokens } from './access/api-token.ts';
import { AccessGuard } from './access/guard.ts';
import { consoleRoutes } from './console/console.ts';
import { DEFAULT_DATA_DIR, DEV_SECRET_FILE, openDataFolder } from './engine/data-folder.ts';
import { SqliteEffectsQueue } from './engine/effects-queue.ts';
import { pruneEffectRecords, SqliteDeadLetters, SqliteEffectLedger } from './engine/effects-records.ts';
import { writeProbe } from './engine/health.ts';
import { SqliteHistory } from './engine/history.ts';
import { SqliteOperationStore } from './engine/operation-store.ts';
import { OutboxFeed } from './engine/outbox.ts';
import { LocalSchedule } from './engine/schedule.ts';
import type { Sqlite } from './engine/sqlite.ts';

export const IN_MEMORY = ':memory:';

export interface LocalRuntime {
  url: string;
  /** The SQLite file (or `:memory:`). */
  dataFile: string;
  /** Set when no WEBHOOK_SIGNING_SECRETS was configured: the generated development secret (never printed). */
  devSecret?: string;
  /** Where the development secret is kept (not with `:memory:`). */
  devSecretFile?: string;
  /** The API token in force (the first, during a rotation): in this process only, never printed. */
  apiToken: string;
  /** Where the tokens came from, and the token file when that is where. */
  tokens: Pick<ApiTokens, 'source' | 'file'>;
  /** A one-time link that signs the console in (within 15 minutes), then opens `next` (default `/`). */
  loginLink(next?: string): string;
  stop(): Promise<void>;
}

export async function startLocalRuntime(config: Config): Promise<LocalRuntime> {
  const logger = createLogger();
  const dataDir = config.DATA_DIR ?? DEFAULT_DATA_DIR;
  // Refused before anything is written: a host others can reach, and no token.
  resolveApiTokens(config.RATCHET_API_TOKEN, dataDir, config.HOST, { generate: false });
  const data = openDataFolder(dataDir);
  const stopped: Array<() => unknown> = [() => data.close()];
  const stop = async () => {
    for (const step of stopped.splice(0).reverse()) await step();
  };
  try {
    if (data.tightened.length > 0)
      logger.warn(`data folder: brought to owner-only (0700 for the folder, 0600 for its files): ${data.tightened.join(', ')}`);
    const devSecret = config.WEBHOOK_SIGNING_SECRETS ? undefined : developmentSecret(dataDir);
    const secrets = parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS ?? (devSecret as string));
    const tokens = resolveApiTokens(config.RATCHET_API_TOKEN, dataDir, config.HOST) as ApiTokens;
    const guard = new AccessGuard({
      tokens: tokens.tokens,
      publicUrls: publicUrls(config.PUBLIC_URL),
      trackRatePerMinute: config.TRACK_RATE_PER_MINUTE,
      logger,
    });
    if (data.dynamoDbLocalLeftover) {
      logger.warn(
        `${data.dynamoDbLocalLeftover} holds data of the DynamoDB Local runtime (before the embedded engine); it is left as it is and not read`,
      );
    }
    const { db } = data;
    const history = new SqliteHistory(db, logger, config.HISTORY_RETENTION_DAYS);
    const effects = effectsPath(config, db, logger);
    const feed = new OutboxFeed(db, [history, ...(effects ? [effects.queue] : [])], logger);
    const store = new SqliteOperationStore(db, () => feed.wake());
    // CloudWatch EMF lines are for AWS: locally only when asked for with POWERTOOLS_METRICS_DISABLED=false.
    const metrics = process.env.POWERTOOLS_METRICS_DISABLED === 'false' ? createMetrics() : undefined;
    let schedule: LocalSchedule | undefined;
    const app = createApp({
      store,
      queries: store,
      history,
      decisions: store,
      receipts: store,
      verifier: new WebhookSignatureVerifier(async () => secrets, dynamicWebhooks(config)),
      pollNow: config.GEMINI_API_KEY ? (operation) => pollNow(operation, { store, wake: async () => schedule?.runSoon() }) : undefined,
      jwtPollsPerMinute: config.TRACK_RATE_PER_MINUTE,
      logger,
      metrics,
      health: writeProbe(db),
      guard: (routes) => guard.install(routes),
      // The guard has judged every Origin first (a browser's own pages send `null` under no-referrer).
      originAllowed: (origin) => origin === 'null' || guard.originAllowed(origin),
      extraRoutes: (routes, { sameOriginJson, fail }) => {
        effectsAdminRoutes(routes, { sameOriginJson, fail, effects });
        consoleRoutes(routes, { store, history, effects: () => effects, reconcileOn: Boolean(config.GEMINI_API_KEY) });
      },
    });
    if (effects) {
      const backlog = feed.backlog(effects.queue.name, 'state-change');
      if (backlog !== undefined) {
        logger.warn(
          `outbound sink: first start: the ${backlog} state change(s) still in the outbox (it keeps a day) are delivered first, then new ones`,
          { backlog },
        );
      }
    }
    feed.start();
    stopped.push(() => feed.stop());
    const maintenance = startMaintenance(logger, [
      () => feed.prune(),
      () => history.prune(),
      () => store.pruneDecisions(),
      () => {
        const deleted = store.deleteUnseen(config.TRACKED_EXPIRY_DAYS * 2 * 86_400_000);
        if (deleted > 0) logger.info(`maintenance: ${deleted} operation(s) tracked but never observed for 2 × TRACKED_EXPIRY_DAYS deleted`);
      },
      () => pruneEffectRecords(db),
    ]);
    stopped.push(() => clearInterval(maintenance));
    if (effects) {
      effects.queue.start(effects.handler);
      stopped.push(() => effects.queue.stop());
    }
    const server = await listen(app.fetch, config.HOST, config.PORT);
    stopped.push(
      () =>
        new Promise<void>((done) => {
          server.close(() => done());
          (server as Server).closeAllConnections();
        }),
    );
    schedule = await startReconcile(config, store, logger);
    if (schedule) stopped.push(() => schedule?.stop());
    const { port } = server.address() as AddressInfo;
    guard.listeningOn(port);
    const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
    const url = `http://${host}:${port}`;
    data.announce(url);
    // The console is opened on loopback (a wildcard HOST listens there too).
    const local = /^(0\.0\.0\.0|::|\[::\])$/.test(config.HOST) ? `http://127.0.0.1:${port}` : url;
    return {
      url,
      dataFile: db.path,
      ...(devSecret && { devSecret }),
      ...(devSecret && dataDir !== IN_MEMORY && { devSecretFile: join(dataDir, DEV_SECRET_FILE) }),
      apiToken: tokens.tokens[0] as string,
      tokens: { source: tokens.source, ...(tokens.file && { file: tokens.file }) },
      loginLink: (next) => guard.loginLink(local, next),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** What each part keeps past its retention goes, at start and hourly (DynamoDB's TTL, on this engine). */
function startMaintenance(logger: Logger, tasks: Array<() => unknown>): NodeJS.Timeout {
  const run = () => {
    for (const task of tasks) {
      try {
        task();
      } catch (error) {
        logger.warn('maintenance: old rows not removed this time', { error: (error as Error).message });
      }
    }
  };
  run();
  return setInterval(run, 3600_000).unref();
}

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
  writeFileSync(file, `${fresh}\n`, { mode: 0o600 });
  return fresh;
}

/**
 * Reconcile every RECONCILE_INTERVAL_SECONDS, as the stack's schedule does,
 * through the same ingest. The Gemini SDK is loaded only when there is a key.
 */
async function startReconcile(config: Config, store: SqliteOperationStore, logger: Logger): Promise<LocalSchedule | undefined> {
  if (!config.GEMINI_API_KEY) {
    logger.warn('reconcile off: GEMINI_API_KEY is not set (webhooks still work; nothing is polled)');
    return undefined;
  }
  const { GenAiPoller } = await import('../lambda/reconcile/gemini-poller.ts');
  const poller = new GenAiPoller({ apiKey: config.GEMINI_API_KEY, baseUrl: config.GEMINI_BASE_URL });
  const health = new WebhookHealth({ webhooks: poller.webhooks, webhookUrl: config.WEBHOOK_URL, logger });
  const discovery = new BatchDiscovery({ lister: poller, store, logger });
  const periodMs = config.RECONCILE_INTERVAL_SECONDS * 1000;
  const schedule = new LocalSchedule(
    periodMs,
    () =>
      reconcile({
        store,
        poller,
        health,
        discovery,
        logger,
        intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
        budgetMs: periodMs * 0.8,
        unseenExpiryMs: config.TRACKED_EXPIRY_DAYS * 86_400_000,
      }),
    logger,
  );
  schedule.start();
  return schedule;
}

export interface LocalEffects {
  queue: SqliteEffectsQueue;
  ledger: SqliteEffectLedger;
  deadLetters: SqliteDeadLetters;
  handler: ReturnType<typeof createEffectsHandler>;
}

/**
 * The effects path, as in AWS: the outbox (the table's stream), filtered to
 * state changes -> the per-operation effects queue -> the effects handler ->
 * the outbound webhook. Off without EFFECTS_WEBHOOK_URL.
 */
function effectsPath(config: Config, db: Sqlite, logger: Logger): LocalEffects | undefined {
  if (!config.EFFECTS_WEBHOOK_URL) {
    logger.info('effects off: EFFECTS_WEBHOOK_URL is not set');
    return undefined;
  }
  if (!config.EFFECTS_SIGNING_SECRET) throw new ConfigError('EFFECTS_WEBHOOK_URL needs EFFECTS_SIGNING_SECRET (whsec_...)');
  const [secret] = parseSigningSecrets(config.EFFECTS_SIGNING_SECRET);
  const queue = new SqliteEffectsQueue(db, { logger });
  const ledger = new SqliteEffectLedger(db);
  const deadLetters = new SqliteDeadLetters(db);
  const handler = createEffectsHandler({
    sinks: [new WebhookSink(config.EFFECTS_WEBHOOK_URL, secret as string, { timeoutMs: config.EFFECTS_WEBHOOK_TIMEOUT_MS })],
    ledger,
    deadLetters,
    queue,
    retry: retrySettings(config),
    logger,
  });
  return { queue, ledger, deadLetters, handler };
}

const RedriveRequest = z.object({ name: z.optional(z.string()), skip: z.optional(z.string()) });

/** The local runtime's effects admin: list the dead letters, re-drive them (what `npm run redrive` calls). */
function effectsAdminRoutes(
  app: Hono,
  deps: {
    sameOriginJson: MiddlewareHandler;
    fail: (failure: Failure, message: string) => Response;
    effects: LocalEffects | undefined;
  },
): void {
  const { effects } = deps;
  app.get('/effects/dead-letters', async (c) => {
    if (!effects) return deps.fail('not-found', 'effects are off (EFFECTS_WEBHOOK_URL is not set)');
    return c.json({ deadLetters: await effects.deadLetters.list(), undecodable: await effects.deadLetters.listUndecodable() });
  });
  app.post('/effects/redrive', deps.sameOriginJson, async (c) => {
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

function listen(fetch: Parameters<typeof serve>[0]['fetch'], hostname: string, port: number) {
  return new Promise<ReturnType<typeof serve>>((resolveServer, reject) => {
    const server = serve({ fetch, hostname, port }, () => resolveServer(server));
    server.once('error', reject);
  });
}
