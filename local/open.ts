/**
 * What both front ends off AWS open, in order, and close again if a step
 * fails: telemetry, the engine (home.ts), the instance around it
 * (app/instance.ts), and the HTTP face: the access guard and the console
 * around the API's routes (app/http/app.ts), with the change feed, the
 * effects admin and `/metrics` mounted among them. `ratchet start` serves it
 * on a port (runtime.ts); `createRatchet` hands it to an application
 * (library.ts).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { Hono } from 'hono';
import { azureResourceOf, publicUrls } from '../app/config.ts';
import type { OnChange } from '../app/effects/app-sink.ts';
import { createApp, withLocalRoutes } from '../app/http/app.ts';
import { answerThrown, noSuchRoute } from '../app/http/routes/common.ts';
import { openAIDeliveries } from '../app/http/routes/provider-webhooks.ts';
import { receiveWebhook } from '../app/http/webhook.ts';
import { dynamicWebhooks, NotConfiguredError, WebhookSignatureVerifier } from '../app/http/webhook-signature.ts';
import { type Instance, openInstance } from '../app/instance.ts';
import { pollNow } from '../app/reconcile/poll-now.ts';
import type { PoolLike } from '../engines/postgres/index.ts';
import { AccessGuard } from './access/guard.ts';
import { consoleRoutes } from './console/console.ts';
import { openEngine } from './home.ts';
import { type Secrets, type Settings, secretsOf } from './settings.ts';
import { type LocalTelemetry, startTelemetry } from './telemetry/index.ts';

export interface Opened {
  instance: Instance;
  app: Hono;
  /** The webhook's receiver (the server also calls it outside the app, on its hot path). */
  receive: ReturnType<typeof receiveWebhook>;
  guard: AccessGuard;
  secrets: Secrets;
  /** Stops the instance and closes the engine, then telemetry; `failed`: the start did not finish. */
  close(failed?: boolean): Promise<void>;
}

export interface OpenOptions {
  logger: Logger;
  /** Whether the API token may come from (and a generated one go to) the data folder's token file: `ratchet start`'s way. */
  tokenFile: boolean;
  /** Where the app is mounted inside an application (`/api/ratchet`): the console's links and redirects start with it. */
  basePath?: string;
  /** SQLite: history and the effects in this process (inside an application). */
  inProcess?: boolean;
  onChange?: OnChange;
  pool?: PoolLike;
}

export async function openLocal(settings: Settings, options: OpenOptions): Promise<Opened> {
  const { logger, basePath = '' } = options;
  const telemetry = await startTelemetry(logger);
  const instance = await openEngine(settings.config, {
    dataDir: settings.dataDir,
    work: settings.work,
    logger,
    telemetry: telemetry.telemetry,
    ...(options.inProcess && { inProcess: true }),
    ...(options.onChange && { onChange: options.onChange }),
    ...(options.pool && { pool: options.pool }),
  })
    .then((engine) => openInstance(engine, settings.instance, { logger, telemetry: telemetry.telemetry }))
    .catch(async (error) => {
      await telemetry.shutdown();
      throw error;
    });
  const close = async (failed = false) => {
    await instance.close(failed);
    await telemetry.shutdown();
  };
  try {
    return { instance, close, ...http(settings, instance, telemetry, { ...options, basePath }) };
  } catch (error) {
    await close(true);
    throw error;
  }
}

/** The guard and the console around the API's routes, on the instance. */
function http(settings: Settings, instance: Instance, telemetry: LocalTelemetry, options: OpenOptions & { basePath: string }) {
  const { config } = settings;
  const { logger, basePath } = options;
  const { engine, credentials } = instance;
  telemetry.observe(engine);
  const { store, changes, history, effects, clock } = engine;
  const secrets = secretsOf(settings, { tokenFile: options.tokenFile });
  const guard = new AccessGuard({
    tokens: secrets.tokens.tokens,
    publicUrls: publicUrls(config.PUBLIC_URL),
    trackRatePerMinute: config.TRACK_RATE_PER_MINUTE,
    logger,
    basePath,
    ...(engine.signIns && { signIns: engine.signIns }),
  });
  const webhookDeps = {
    store,
    ...(clock && { clock }),
    decisions: store,
    receipts: store,
    unprocessable: store,
    verifier: new WebhookSignatureVerifier(async () => secrets.signingSecrets, dynamicWebhooks(config)),
    pollNow: instance.reconciles
      ? (operation: Parameters<typeof pollNow>[0]) =>
          pollNow(operation, { store, wake: async () => instance.pollSoon(), ...(clock && { clock }) })
      : undefined,
    wakeReconcile: instance.reconciles ? async () => instance.pollSoon() : undefined,
    jwtPollsPerMinute: config.TRACK_RATE_PER_MINUTE,
    logger,
    telemetry: telemetry.telemetry,
  };
  const receive = receiveWebhook(webhookDeps);
  // OpenAI's and Azure OpenAI's deliveries: Standard Webhooks with their own secrets, read by providers/openai.
  const providerReceiver = (provider: 'openai' | 'azure-openai', azureResource?: string) =>
    receiveWebhook({
      ...webhookDeps,
      verifier: new WebhookSignatureVerifier(async () => {
        const theirs = secrets.providerSecrets[provider];
        // Without its secret a delivery is kept by the sender (503) until one is set, as Gemini's is.
        if (theirs.length === 0)
          throw new NotConfiguredError(`${provider === 'openai' ? 'OPENAI' : 'AZURE_OPENAI'}_WEBHOOK_SECRET is not set`);
        return theirs;
      }),
      map: openAIDeliveries({ queries: store, ...(azureResource && { azureResource }) }),
    });
  const azureResource = config.AZURE_OPENAI_ENDPOINT && azureResourceOf(config.AZURE_OPENAI_ENDPOINT);
  // The guard has judged every Origin first (a browser's own pages send `null` under no-referrer).
  const originAllowed = (origin: string) => origin === 'null' || guard.originAllowed(origin);
  const api = createApp({
    ...webhookDeps,
    receive,
    providerWebhooks: {
      openai: providerReceiver('openai'),
      ...(azureResource && { 'azure-openai': providerReceiver('azure-openai', azureResource) }),
    },
    queries: store,
    history,
    health: () => engine.health(),
    geminiKeys: () => credentials.all(),
    providerKeys: () => instance.providerKeys,
    credentials: settings.instance.providerLabels,
    waitForVersion: (name, afterVersion, waitMs, signal) => changes.versionPast(name, afterVersion, waitMs, signal),
    originAllowed,
    basePath,
  });
  withLocalRoutes(api, {
    logger,
    originAllowed,
    changes: { feed: changes, keepAliveMs: config.FEED_KEEP_ALIVE_SECONDS * 1000, stallMs: config.FEED_STALL_SECONDS * 1000 },
    effectsAdmin: { effects, redrive: (redriveOptions) => engine.redrive(redriveOptions) },
    exposition: { contentType: telemetry.prometheus.contentType, scrape: () => telemetry.prometheus.scrape(engine) },
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
    engine: engine.label,
    reconcileOn: instance.reconciles,
    unprocessable: store,
    geminiKeys: () => credentials.all(),
    basePath,
  });
  app.route('/', api);
  app.notFound(noSuchRoute);
  app.onError(answerThrown(logger));
  return { app, receive, guard, secrets };
}
