/**
 * Ratchet's HTTP face and its reconcile, wired to a home (home.ts): what
 * `ratchet start` serves on its port (runtime.ts) and what the library hands
 * an application as one fetch handler (library.ts). The access guard in front,
 * the shared app (app/http/app.ts) with the webhook, the API, the change feed,
 * the console and the effects admin; reconcile with the Gemini SDK loaded only
 * where something is to be polled.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '@aws-lambda-powertools/logger';
import { Hono } from 'hono';
import type { Config } from '../app/config.ts';
import { agentPlatformOf, overdueAfterOf, publicUrls } from '../app/config.ts';
import type { Engine } from '../app/engine.ts';
import { createApp } from '../app/http/app.ts';
import { answerThrown, noSuchRoute } from '../app/http/routes/common.ts';
import { receiveWebhook } from '../app/http/webhook.ts';
import { dynamicWebhooks, parseSigningSecrets, WebhookSignatureVerifier } from '../app/http/webhook-signature.ts';
import { CredentialHealth } from '../app/reconcile/credentials.ts';
import { BatchDiscovery } from '../app/reconcile/discovery.ts';
import { pollNow } from '../app/reconcile/poll-now.ts';
import { type ReconcileStats, reconcile } from '../app/reconcile/reconcile.ts';
import { WebhookHealth } from '../app/reconcile/webhook-health.ts';
import type { Telemetry } from '../app/telemetry.ts';
import { geminiKeysOf } from '../core/credentials.ts';
import type { OperationKind } from '../core/lifecycle.ts';
import { DEV_SECRET_FILE, IN_MEMORY } from '../engines/sqlite/index.ts';
import { type ApiTokens, resolveApiTokens } from './access/api-token.ts';
import { AccessGuard } from './access/guard.ts';
import { consoleRoutes } from './console/console.ts';
import type { LocalTelemetry } from './telemetry/index.ts';

export interface Assembled {
  app: Hono;
  /** The webhook's receiver (the server also calls it outside the app, on its hot path). */
  receive: ReturnType<typeof receiveWebhook>;
  guard: AccessGuard;
  tokens: ApiTokens;
  /** Set when no WEBHOOK_SIGNING_SECRETS was configured: the generated development secret (never printed). */
  devSecret?: string;
  devSecretFile?: string;
  /** Called when a webhook asks for a poll now (a dynamic webhook's JWT): the resident schedule's extra run, if any. */
  onPollSoon(wake: () => void): void;
  /** Whether Gemini takes each API key (GEMINI_API_KEYS), as reconcile finds: the console and `/healthz` show it. */
  credentials: CredentialHealth;
}

export interface AssembleOptions {
  dataDir: string;
  logger: Logger;
  /** Where the app is mounted inside an application (`/api/ratchet`): the console's links and the sign-in's redirects start with it. */
  basePath?: string;
  /** What webhooks are counted into and `GET /metrics` serves (and OpenTelemetry, where it is on). */
  telemetry: LocalTelemetry;
  /**
   * Whether the API token may come from the data folder's token file, and a generated one go there (default true,
   * as `ratchet start` announces it). Inside an app, false: without `apiToken` the token is kept in the process, for
   * `ratchet.client` only (docs/apps.md), and nothing is written into a folder that is often the app's own.
   */
  tokenFile?: boolean;
}

export function assemble(config: Config, home: Engine, options: AssembleOptions): Assembled {
  const { dataDir, logger, basePath = '', telemetry, tokenFile = true } = options;
  telemetry.observe(home);
  const { store, changes, history, effects } = home;
  // On PostgreSQL the folder holds only the generated token and development secret: made here, owner-only, when missing.
  if (dataDir !== IN_MEMORY) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const devSecret = config.WEBHOOK_SIGNING_SECRETS ? undefined : developmentSecret(dataDir);
  const secrets = parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS ?? (devSecret as string));
  const tokens = resolveApiTokens(config.RATCHET_API_TOKEN, tokenFile ? dataDir : IN_MEMORY, config.HOST) as ApiTokens;
  const guard = new AccessGuard({
    tokens: tokens.tokens,
    publicUrls: publicUrls(config.PUBLIC_URL),
    trackRatePerMinute: config.TRACK_RATE_PER_MINUTE,
    logger,
    basePath,
    ...(home.signIns && { signIns: home.signIns }),
  });
  let pollSoon: () => void = () => {};
  const labels = credentialLabelsOf(config);
  const credentials = new CredentialHealth(labels);
  // On PostgreSQL the database's time: what one instance stamps, another compares.
  const clock = home.clock;
  const webhookDeps = {
    store,
    ...(clock && { clock }),
    decisions: store,
    receipts: store,
    unprocessable: store,
    verifier: new WebhookSignatureVerifier(async () => secrets, dynamicWebhooks(config)),
    pollNow: reconcileOn(config)
      ? (operation: { name: string; kind: OperationKind }) =>
          pollNow(operation, { store, wake: async () => pollSoon(), ...(clock && { clock }) })
      : undefined,
    jwtPollsPerMinute: config.TRACK_RATE_PER_MINUTE,
    logger,
    telemetry: telemetry.telemetry,
  };
  const receive = receiveWebhook(webhookDeps);
  const api = createApp({
    ...webhookDeps,
    receive,
    queries: store,
    history,
    health: () => home.health(),
    geminiKeys: () => credentials.all(),
    credentials: labels,
    waitForVersion: (name, afterVersion, waitMs, signal) => changes.versionPast(name, afterVersion, waitMs, signal),
    // The guard has judged every Origin first (a browser's own pages send `null` under no-referrer).
    originAllowed: (origin) => origin === 'null' || guard.originAllowed(origin),
    basePath,
    changes: { feed: changes, keepAliveMs: config.FEED_KEEP_ALIVE_SECONDS * 1000, stallMs: config.FEED_STALL_SECONDS * 1000 },
    effectsAdmin: { effects, redrive: (redriveOptions) => home.redrive(redriveOptions) },
    exposition: { contentType: telemetry.prometheus.contentType, scrape: () => telemetry.prometheus.scrape(home) },
  });
  // The guard before every route (a 404 included), the console's pages beside the API's routes, and the API's
  // answers to a path no route serves and to what the guard or a page throws.
  const app = new Hono();
  guard.install(app);
  consoleRoutes(app, {
    store,
    history,
    feed: changes,
    effects: () => effects,
    engine: home.label,
    reconcileOn: reconcileOn(config),
    unprocessable: store,
    geminiKeys: () => credentials.all(),
    basePath,
  });
  app.route('/', api);
  app.notFound(noSuchRoute);
  app.onError(answerThrown(logger));
  return {
    app,
    receive,
    guard,
    tokens,
    ...(devSecret && { devSecret }),
    ...(devSecret && dataDir !== IN_MEMORY && { devSecretFile: join(dataDir, DEV_SECRET_FILE) }),
    onPollSoon: (wake) => {
      pollSoon = wake;
    },
    credentials,
  };
}

/** The labels of GEMINI_API_KEYS (none for a single GEMINI_API_KEY). */
function credentialLabelsOf(config: Config): string[] {
  return (config.GEMINI_API_KEYS && geminiKeysOf(config.GEMINI_API_KEYS)?.map((key) => key.label)) || [];
}

/** Whether reconcile polls anything: a Gemini API key, or an Agent Platform project and location. */
export function reconcileOn(config: Config): boolean {
  return Boolean(config.GEMINI_API_KEY || config.GEMINI_API_KEYS || agentPlatformOf(config));
}

/** One reconcile run within `budgetMs`, through the same ingest: the due polls, and discovery and the webhook health check when due. */
export type Reconciler = (budgetMs: number) => Promise<ReconcileStats>;

/**
 * Reconcile as the stack's schedule runs it. The Gemini SDK is loaded only
 * when there is something to poll; undefined (and said once) when there is not.
 */
export async function reconcilerOf(
  config: Config,
  home: Engine,
  logger: Logger,
  credentialHealth?: CredentialHealth,
  telemetry?: Telemetry,
): Promise<Reconciler | undefined> {
  const { store, claimJob } = home;
  const off = () =>
    logger.warn(
      'reconcile off: neither GEMINI_API_KEY nor GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION are set (nor GEMINI_API_KEYS; webhooks still work; nothing is polled)',
    );
  // Without credentials the SDK is not even loaded (a library's cold start pays for it only where it polls).
  if (!reconcileOn(config)) return void off();
  const { GenAiPoller, pollerOptionsOf } = await import('../app/reconcile/gemini-poller.ts');
  const options = await pollerOptionsOf(config, async (name) => config[name]);
  if (!options) return void off();
  const poller = new GenAiPoller({ ...options, ...(credentialHealth && { credentialHealth }) });
  // The webhook health check and discovery are the Gemini API's (the Agent Platform sends no webhooks and lists nothing here).
  // On several instances (PostgreSQL) each hourly chore runs on the one that claims it.
  const health = options.gemini && new WebhookHealth({ webhooks: poller.webhooks, webhookUrl: config.WEBHOOK_URL, logger, claimJob });
  const discovery = options.gemini && new BatchDiscovery({ lister: poller, store, logger, claimJob, credentials: poller.labels });
  return (budgetMs) =>
    reconcile({
      store,
      poller,
      health,
      discovery,
      logger,
      intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
      budgetMs,
      unseenExpiryMs: config.TRACKED_EXPIRY_DAYS * 86_400_000,
      overdueAfter: overdueAfterOf(config),
      ...(home.clock && { clock: home.clock }),
      ...(telemetry && { telemetry }),
    });
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
