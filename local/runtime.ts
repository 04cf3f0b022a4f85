/**
 * The whole system on one machine, wired: the embedded engine (one SQLite
 * file in DATA_DIR: the operations, their outbox, history, the effects queue),
 * the HTTP API served through the same handler code as the Lambda, the
 * outbox feed to history and the effects queue, and the reconcile schedule.
 * Each part lives in engines/sqlite and local/; this file only connects them.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../app/config.ts';
import { webhookSinkSettingsOf } from '../app/effects/webhook-sink.ts';
import { createLogger } from '../app/logger.ts';
import { everyHour, LocalSchedule } from '../app/schedule.ts';
import { DEFAULT_DATA_DIR } from '../engines/sqlite/index.ts';
import { type ApiTokens, resolveApiTokens } from './access/api-token.ts';
import { assemble, reconcilerOf } from './assemble.ts';
import { engineWorkOf, openEngine } from './home.ts';
import { listen } from './http-server.ts';
import { checkStartConfig } from './start-config.ts';
import { startTelemetry } from './telemetry/index.ts';

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
  loginLink(next?: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startLocalRuntime(config: Config): Promise<LocalRuntime> {
  const logger = createLogger();
  const dataDir = config.DATA_DIR ?? DEFAULT_DATA_DIR;
  // Refused before anything is opened or written: each setting, and a host others can reach with no token.
  checkStartConfig(config);
  // Resolved once, here: what the derived work and the effects records need (the effects secret parsed in this one place).
  const sink = webhookSinkSettingsOf(config);
  const work = engineWorkOf(config, sink);
  resolveApiTokens(config.RATCHET_API_TOKEN, dataDir, config.HOST, { generate: false });
  const telemetry = await startTelemetry(logger);
  const home = await openEngine(config, { dataDir, work, logger, telemetry: telemetry.telemetry }).catch(async (error) => {
    await telemetry.shutdown();
    throw error;
  });
  let ready = false;
  // A start that fails closes what it opened and removes a data folder it created; a running one only closes.
  const stopped: Array<() => unknown> = [() => telemetry.shutdown(), () => home.close(!ready)];
  const stop = async () => {
    for (const step of stopped.splice(0).reverse()) await step();
  };
  try {
    const { app, receive, guard, tokens, devSecret, devSecretFile, onPollSoon, credentials } = assemble(config, home, {
      dataDir,
      logger,
      telemetry,
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
    const reconciler = await reconcilerOf(config, home, logger, credentials, telemetry.telemetry);
    if (reconciler) {
      const periodMs = config.RECONCILE_INTERVAL_SECONDS * 1000;
      const schedule = new LocalSchedule(periodMs, () => reconciler(periodMs * 0.8), logger);
      schedule.start();
      onPollSoon(() => schedule.runSoon());
      stopped.push(() => schedule.stop());
    }
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
      ...(devSecretFile && { devSecretFile }),
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
