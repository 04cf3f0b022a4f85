/**
 * The whole system on one machine, wired: the embedded engine (one SQLite
 * file in DATA_DIR: the operations, their outbox, history, the effects queue),
 * the HTTP API served through the same handler code as the Lambda, the
 * outbox feed to history and the effects queue, and the reconcile schedule.
 * Each part lives in engines/sqlite and local/; this file only connects them.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Hono, MiddlewareHandler } from 'hono';
import * as z from 'zod/mini';
import type { Config } from '../app/config.ts';
import { agentPlatformOf, publicUrls } from '../app/config.ts';
import { webhookSinkSettingsOf } from '../app/effects/webhook-sink.ts';
import { createApp } from '../app/http/app.ts';
import { receiveWebhook } from '../app/http/webhook.ts';
import { dynamicWebhooks, parseSigningSecrets, WebhookSignatureVerifier } from '../app/http/webhook-signature.ts';
import { createLogger, createMetrics } from '../app/logger.ts';
import { BatchDiscovery } from '../app/reconcile/discovery.ts';
import { pollNow } from '../app/reconcile/poll-now.ts';
import { reconcile } from '../app/reconcile/reconcile.ts';
import { WebhookHealth } from '../app/reconcile/webhook-health.ts';
import type { Failure } from '../core/failures.ts';
import type { OperationKind } from '../core/lifecycle.ts';
import { DEFAULT_DATA_DIR, DEV_SECRET_FILE } from '../engines/sqlite/data-folder.ts';
import { type ApiTokens, resolveApiTokens } from './access/api-token.ts';
import { AccessGuard } from './access/guard.ts';
import { consoleRoutes } from './console/console.ts';
import { derivedWorkOptionsOf } from './derived-work.ts';
import { feedRoutes } from './feed/routes.ts';
import { type EffectsRecords, type Home, IN_MEMORY, openSqliteHome } from './home.ts';
import { listen } from './http-server.ts';
import { everyHour, LocalSchedule } from './schedule.ts';
import { checkStartConfig } from './start-config.ts';

export interface LocalRuntime {
  url: string;
  /** The SQLite file (or `:memory:`), or the PostgreSQL schema in words. */
  dataFile: string;
  /** The engine and where, in words (the console shows it). */
  engine: string;
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
  // Refused before anything is opened or written: each setting, and a host others can reach with no token.
  checkStartConfig(config);
  // Resolved once, here: what the derived work and the effects records need (the effects secret parsed in this one place).
  const sink = webhookSinkSettingsOf(config);
  const derived = derivedWorkOptionsOf(config, sink);
  resolveApiTokens(config.RATCHET_API_TOKEN, dataDir, config.HOST, { generate: false });
  const homeOptions = {
    dataDir,
    historyRetentionDays: config.HISTORY_RETENTION_DAYS,
    trackedExpiryDays: config.TRACKED_EXPIRY_DAYS,
    derived,
    logger,
  };
  const home = config.DATABASE_URL
    ? await (await import('./home-postgres.ts')).openPostgresHome(config, homeOptions)
    : openSqliteHome(homeOptions);
  const { store, changes, history, effects } = home;
  let ready = false;
  // A start that fails closes what it opened and removes a data folder it created; a running one only closes.
  const stopped: Array<() => unknown> = [() => home.close(!ready)];
  const stop = async () => {
    for (const step of stopped.splice(0).reverse()) await step();
  };
  try {
    const devSecret = config.WEBHOOK_SIGNING_SECRETS ? undefined : developmentSecret(dataDir);
    const secrets = parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS ?? (devSecret as string));
    const tokens = resolveApiTokens(config.RATCHET_API_TOKEN, dataDir, config.HOST) as ApiTokens;
    const guard = new AccessGuard({
      tokens: tokens.tokens,
      publicUrls: publicUrls(config.PUBLIC_URL),
      trackRatePerMinute: config.TRACK_RATE_PER_MINUTE,
      logger,
    });
    // CloudWatch EMF lines are for AWS: locally only when asked for with POWERTOOLS_METRICS_DISABLED=false.
    const metrics = process.env.POWERTOOLS_METRICS_DISABLED === 'false' ? createMetrics() : undefined;
    let schedule: LocalSchedule | undefined;
    const webhookDeps = {
      store,
      decisions: store,
      receipts: store,
      unprocessable: store,
      verifier: new WebhookSignatureVerifier(async () => secrets, dynamicWebhooks(config)),
      pollNow: reconcileOn(config)
        ? (operation: { name: string; kind: OperationKind }) => pollNow(operation, { store, wake: async () => schedule?.runSoon() })
        : undefined,
      jwtPollsPerMinute: config.TRACK_RATE_PER_MINUTE,
      logger,
      metrics,
    };
    // One receiver for the app's route and the server's own webhook path (local/http-server.ts).
    const receive = receiveWebhook(webhookDeps);
    const app = createApp({
      ...webhookDeps,
      receive,
      queries: store,
      history,
      health: () => home.health(),
      waitForVersion: (name, afterVersion, waitMs, signal) => changes.versionPast(name, afterVersion, waitMs, signal),
      guard: (routes) => guard.install(routes),
      // The guard has judged every Origin first (a browser's own pages send `null` under no-referrer).
      originAllowed: (origin) => origin === 'null' || guard.originAllowed(origin),
      extraRoutes: (routes, { sameOriginJson, fail }) => {
        effectsAdminRoutes(routes, { sameOriginJson, fail, effects, redrive: (options) => home.redrive(options) });
        feedRoutes(routes, changes, { keepAliveMs: config.FEED_KEEP_ALIVE_SECONDS * 1000, stallMs: config.FEED_STALL_SECONDS * 1000 });
        consoleRoutes(routes, {
          store,
          history,
          feed: changes,
          effects: () => effects,
          engine: home.label,
          reconcileOn: reconcileOn(config),
          unprocessable: store,
        });
      },
    });
    await home.start();
    const maintenance = everyHour(logger, home.maintenance, home.claimJob);
    stopped.push(() => clearInterval(maintenance));
    const server = await listen(
      app.fetch,
      config.HOST,
      config.PORT,
      {
        maxInFlight: config.HTTP_MAX_IN_FLIGHT,
        maxWaiting: config.FEED_MAX_WAITING,
        headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT_MS,
        // Node wants the request timeout above the headers timeout.
        requestTimeoutMs: Math.max(config.HTTP_REQUEST_TIMEOUT_MS, config.HTTP_HEADERS_TIMEOUT_MS + 1),
      },
      logger,
      receive,
    );
    stopped.push(
      () =>
        new Promise<void>((done) => {
          server.close(() => done());
          (server as Server).closeAllConnections();
        }),
    );
    schedule = await startReconcile(config, home, logger);
    if (schedule) stopped.push(() => schedule?.stop());
    const { port } = server.address() as AddressInfo;
    guard.listeningOn(port);
    const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
    const url = `http://${host}:${port}`;
    home.announce(url);
    // The console is opened on loopback (a wildcard HOST listens there too).
    const local = /^(0\.0\.0\.0|::|\[::\])$/.test(config.HOST) ? `http://127.0.0.1:${port}` : url;
    ready = true;
    return {
      url,
      dataFile: home.where,
      engine: home.label,
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

/** Whether reconcile polls anything: a Gemini API key, or an Agent Platform project and location. */
function reconcileOn(config: Config): boolean {
  return Boolean(config.GEMINI_API_KEY || agentPlatformOf(config));
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
async function startReconcile(config: Config, home: Home, logger: Logger): Promise<LocalSchedule | undefined> {
  const { store, claimJob } = home;
  const { GenAiPoller, pollerOptionsOf } = await import('../app/reconcile/gemini-poller.ts');
  const options = await pollerOptionsOf(config, async (name) => config[name]);
  if (!options) {
    logger.warn(
      'reconcile off: neither GEMINI_API_KEY nor GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION are set (webhooks still work; nothing is polled)',
    );
    return undefined;
  }
  const poller = new GenAiPoller(options);
  // The webhook health check and discovery are the Gemini API's (the Agent Platform sends no webhooks and lists nothing here).
  // On several instances (PostgreSQL) each hourly chore runs on the one that claims it.
  const health = options.gemini && new WebhookHealth({ webhooks: poller.webhooks, webhookUrl: config.WEBHOOK_URL, logger, claimJob });
  const discovery = options.gemini && new BatchDiscovery({ lister: poller, store, logger, claimJob });
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

const RedriveRequest = z.object({ name: z.optional(z.string()), skip: z.optional(z.string()) });

/** The local runtime's effects admin: list the dead letters, re-drive them (what `npm run redrive` calls). */
function effectsAdminRoutes(
  app: Hono,
  deps: {
    sameOriginJson: MiddlewareHandler;
    fail: (failure: Failure, message: string) => Response;
    effects: EffectsRecords | undefined;
    redrive: Home['redrive'];
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
    try {
      return c.json(await deps.redrive(request.data));
    } catch (error) {
      // The derived-work process is restarting, or stopped before it answered: try again (a repeat is harmless, the ledger delivers each effect once).
      return deps.fail('not-recorded', (error as Error).message);
    }
  });
}
