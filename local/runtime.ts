/**
 * The whole system on one machine (`ratchet start`): the instance on its
 * engine (open.ts: SQLite in DATA_DIR, or PostgreSQL), served on a port by
 * a Node server (http-server.ts) through the same handler code as the Lambda.
 * This file only connects them and says where it listens.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Config } from '../app/config.ts';
import { createLogger } from '../app/logger.ts';
import { type ApiTokens, resolveApiTokens } from './access/api-token.ts';
import { listen } from './http-server.ts';
import { openLocal } from './open.ts';
import { settingsOf } from './settings.ts';

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
  // Refused before anything is opened or written: each setting, and a host others can reach with no token.
  const settings = settingsOf(config);
  resolveApiTokens(config.RATCHET_API_TOKEN, settings.dataDir, config.HOST, { generate: false });
  const opened = await openLocal(settings, { logger, tokenFile: true });
  const { instance, secrets, guard } = opened;
  let server: Server | undefined;
  // A start that fails closes what it opened and removes a data folder it created; a running one only closes.
  const stop = async (failed = false) => {
    if (server) {
      const closing = new Promise((done) => server?.close(done));
      server.closeAllConnections();
      await closing;
    }
    await opened.close(failed);
  };
  try {
    await instance.start();
    server = await listen(
      opened.app.fetch,
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
      opened.receive,
    );
    const { port } = server.address() as AddressInfo;
    guard.listeningOn(port);
    const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
    const url = `http://${host}:${port}`;
    instance.engine.announce(url);
    // The console is opened on loopback (a wildcard HOST listens there too).
    const local = /^(0\.0\.0\.0|::|\[::\])$/.test(config.HOST) ? `http://127.0.0.1:${port}` : url;
    const { tokens, devSecret, devSecretFile } = secrets;
    return {
      url,
      dataFile: instance.engine.where,
      engine: instance.engine.label,
      ...(devSecret && { devSecret }),
      ...(devSecretFile && { devSecretFile }),
      apiToken: tokens.tokens[0] as string,
      tokens: { source: tokens.source, ...(tokens.file && { file: tokens.file }) },
      loginLink: (next) => guard.loginLink(local, next),
      stop: () => stop(),
    };
  } catch (error) {
    await stop(true);
    throw error;
  }
}
