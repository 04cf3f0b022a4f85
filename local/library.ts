/**
 * Ratchet inside an application: `createRatchet(options)`, what `@ratchet/server`
 * exports (docs/apps.md). The same engines, API, console and reconcile as
 * `ratchet start`, handed over instead of served on a port:
 * - `fetch(request)`: the webhook, the API, the change feed and the console as
 *   one standard fetch handler, mountable under `basePath`;
 * - `tick({ budgetMs })`: one bounded round of what a resident server does on
 *   timers (reconcile's due polls with discovery and the webhook health check,
 *   the effects that are due, the hourly pruning), for a cron to call; every
 *   piece is claimed, so ticks at once, or beside `start()` on another
 *   instance, do nothing twice;
 * - `start()` / `close()`: the same work on timers where the process stays up;
 * - `onChange(change, { sql })`: the application's function for each applied
 *   change, with the outbound webhook's guarantees (on PostgreSQL in the
 *   transaction that records the delivery);
 * - `client`: the `RatchetClient` API (get, waitFor, watch, track, list…) on
 *   `fetch`, in this process, without a socket.
 *
 * Nothing is opened until first used (`fetch`, `tick`, `start`, `ready`); on
 * PostgreSQL no timer runs and no connection stays in use between calls
 * unless `start()` was called. On SQLite (an application with a disk that stays
 * up), history and the effects run from first use until `close()`.
 */
import type { TickResult } from '../app/instance.ts';
import { createLogger } from '../app/logger.ts';
import { FAILURES, failureBody, RETRY_AFTER_SECONDS } from '../core/failures.ts';
import { IN_MEMORY } from '../engines/sqlite/index.ts';
import { RatchetClient } from '../sdk/client.ts';
import { type Opened, openLocal } from './open.ts';
import { appSettingsOf, type RatchetOptions } from './settings.ts';

export { ConfigError } from '../app/config.ts';
export type { ChangeContext, OnChange, StateChange } from '../app/effects/app-sink.ts';
export type { TickResult } from '../app/instance.ts';
export type { PoolLike } from '../engines/postgres/index.ts';
export { RatchetClient, RatchetError } from '../sdk/client.ts';
export type { RatchetOptions } from './settings.ts';

export interface TickOptions {
  /** How long the round may take (default 10 s): reconcile stops taking new polls at half of it, the effects at the end. */
  budgetMs?: number;
}

/** The reads and the track of `RatchetClient`, the same shapes, in this process. */
export type InProcessApi = Pick<RatchetClient, 'get' | 'list' | 'history' | 'track' | 'waitFor' | 'watch' | 'changes'>;

export interface Ratchet extends InProcessApi {
  /** The webhook, the API, the change feed and the console, for any framework's route. */
  fetch(request: Request): Promise<Response>;
  tick(options?: TickOptions): Promise<TickResult>;
  /** Runs the tick's work on timers, for a process that stays up (and wakes the change feed and effects at once on PostgreSQL). */
  start(): Promise<void>;
  /** Stops the timers and closes the engine (never the application's pool). */
  close(): Promise<void>;
  /** Resolves once the engine is open (and migrated): rejects with why it cannot be, in one line. */
  ready(): Promise<void>;
  /** The HTTP API as `RatchetClient` has it, in this process: `get`, `waitFor`, `watch`, `track`, `list`, `history`, `changes`. */
  readonly client: RatchetClient;
  /** The engine and where, in words. */
  readonly engine: string;
}

const DEFAULT_TICK_BUDGET_MS = 10_000;

/**
 * A Ratchet for this application. Every setting is checked here, before
 * anything is opened (a ConfigError naming the option's variable); the engine
 * opens on first use.
 */
export function createRatchet(options: RatchetOptions = {}): Ratchet {
  const { settings, env, onPostgres, basePath } = appSettingsOf(options);
  const logger = createLogger('ratchet', env.POWERTOOLS_LOG_LEVEL);
  if (!settings.config.WEBHOOK_SIGNING_SECRETS && settings.dataDir === IN_MEMORY)
    logger.warn(
      'ratchet: no webhookSigningSecrets (WEBHOOK_SIGNING_SECRETS): a secret for this process only was generated; webhooks signed with any other are refused',
    );
  let opened: Promise<Opened> | undefined;
  let closed = false;
  const open = (): Promise<Opened> => {
    if (closed) return Promise.reject(new Error('this Ratchet is closed'));
    opened ??= openLocal(settings, {
      logger,
      basePath,
      tokenFile: false,
      inProcess: true,
      ...(options.onChange && { onChange: options.onChange }),
      ...(options.pool && { pool: options.pool }),
    }).then((ready) => {
      if (ready.secrets.devSecretFile)
        logger.warn(
          `ratchet: no webhookSigningSecrets (WEBHOOK_SIGNING_SECRETS): webhooks are checked against the development secret in ${ready.secrets.devSecretFile}`,
        );
      return ready;
    });
    // A database that could not be reached is tried again on the next call.
    opened.catch(() => {
      opened = undefined;
    });
    return opened;
  };

  const ratchet: Omit<Ratchet, keyof InProcessApi | 'client'> = {
    engine: onPostgres ? 'PostgreSQL' : settings.dataDir === IN_MEMORY ? 'SQLite (in memory)' : 'SQLite',
    async fetch(request) {
      let ready: Opened;
      try {
        ready = await open();
      } catch (error) {
        // Described answers, each with Retry-After as every 503 (docs/contract.md): the store away is not-recorded,
        // as on every route once open; a few seconds between tries, each of which opens a connection anew.
        if (closed)
          return Response.json(failureBody('closed', 'this Ratchet is closed (close() was called)'), {
            status: FAILURES.closed,
            headers: { 'retry-after': String(RETRY_AFTER_SECONDS), 'cache-control': 'no-store' },
          });
        logger.error('ratchet: the engine could not be opened', { detail: (error as Error).message });
        return Response.json(failureBody('not-recorded', 'Ratchet cannot reach its database; try again'), {
          status: FAILURES['not-recorded'],
          headers: { 'retry-after': '5', 'cache-control': 'no-store' },
        });
      }
      return serveUnder(basePath, request, (inner) => ready.app.fetch(inner));
    },
    async tick(tickOptions = {}) {
      // The budget counts from the call: a first tick's open (and migration) is part of the round.
      const startedAt = Date.now();
      const { instance } = await open();
      const round = await instance.tick(Math.max(0, (tickOptions.budgetMs ?? DEFAULT_TICK_BUDGET_MS) - (Date.now() - startedAt)));
      return { ...round, tookMs: Date.now() - startedAt };
    },
    async start() {
      await (await open()).instance.start();
    },
    async close() {
      if (closed) return;
      closed = true;
      await (await opened?.catch(() => undefined))?.close();
    },
    async ready() {
      await open();
    },
  };
  // The client's token is the API's own: known once the engine opened (a generated one lives in this process only).
  const inProcess = async (input: string | URL | Request, init?: RequestInit) => {
    const { secrets } = await open();
    const request = new Request(input, init);
    request.headers.set('authorization', `Bearer ${secrets.tokens.tokens[0]}`);
    return ratchet.fetch(request);
  };
  const client = new RatchetClient({
    url: `http://127.0.0.1${basePath}`,
    signer: 'none',
    token: 'in-process',
    retries: 0,
    fetch: inProcess as typeof fetch,
  });
  return Object.assign(ratchet, {
    client,
    get: client.get.bind(client),
    list: client.list.bind(client),
    history: client.history.bind(client),
    track: client.track.bind(client),
    waitFor: client.waitFor.bind(client),
    watch: client.watch.bind(client),
    changes: client.changes.bind(client),
  });
}

/**
 * `request` handed to the app with `basePath` taken off its path (404 outside
 * it); the app was given its base path (open.ts), so its answers' links and
 * redirects are under the mount already. A Request made in code (not read off
 * a socket) has no Host header: its URL's host is the one asked for.
 */
async function serveUnder(basePath: string, request: Request, app: (request: Request) => Response | Promise<Response>): Promise<Response> {
  // Mounted at the root, a request off a socket goes to the app as it is.
  if (!basePath && request.headers.has('host')) return app(request);
  const url = new URL(request.url);
  if (basePath && url.pathname !== basePath && !url.pathname.startsWith(`${basePath}/`))
    return Response.json({ error: 'not-found', message: `not under ${basePath}` }, { status: 404 });
  url.pathname = url.pathname.slice(basePath.length) || '/';
  const headers = new Headers(request.headers);
  if (!headers.has('host')) headers.set('host', url.host);
  const inner = new Request(url, {
    method: request.method,
    headers,
    body: request.body,
    signal: request.signal,
    duplex: 'half',
  } as RequestInit);
  return app(inner);
}
