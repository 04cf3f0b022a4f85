/**
 * Everything the embedded engine derives from the outbox, apart from the
 * thread that answers webhooks: the outbox feed to history and the effects
 * queue, the effects handler with its outbound webhook, and their hourly
 * pruning. The ingest thread only verifies, reduces and commits (the
 * operation and its outbox row, in one transaction), then wakes this.
 *
 * On a data file it runs in a child process of its own (derived-process.ts)
 * with its own SQLite connection on the same WAL file, so delivering effects
 * never takes a turn of the ingest thread's event loop; the parent restarts
 * it if it dies (`kill -9` included: what it had not committed is in the
 * outbox and the effects queue, and is done again, once, in order). With
 * `DATA_DIR=:memory:` there is no file to share: it runs in this process.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Config } from '../../lambda/config.ts';
import { ConfigError } from '../../lambda/config.ts';
import { createEffectsHandler } from '../../lambda/effects/process.ts';
import { type RedriveOptions, redrive } from '../../lambda/effects/redrive.ts';
import { retrySettings } from '../../lambda/effects/settings.ts';
import { WebhookSink } from '../../lambda/effects/webhook-sink.ts';
import { parseSigningSecrets } from '../../lambda/http/webhook-signature.ts';
import { SqliteEffectsQueue } from './effects-queue.ts';
import { pruneEffectRecords, SqliteDeadLetters, SqliteEffectLedger } from './effects-records.ts';
import { SqliteHistory } from './history.ts';
import { pooledPost } from './outbound-pool.ts';
import { OutboxFeed } from './outbox.ts';
import type { Sqlite } from './sqlite.ts';

export type RedriveResult = Awaited<ReturnType<typeof redrive>>;

export interface DerivedWork {
  /** An applied write committed: its changes are waiting in the outbox. */
  wake(): void;
  /** Re-queues dead letters (`npm run redrive`, the console's button). */
  redrive(options: RedriveOptions): Promise<RedriveResult>;
  stop(): Promise<void>;
}

/** The feed, history and (with EFFECTS_WEBHOOK_URL) the effects path, on `db`, in this process. */
export function startDerivedWork(db: Sqlite, config: Config, logger: Logger): DerivedWork {
  const history = new SqliteHistory(db, logger, config.HISTORY_RETENTION_DAYS);
  const effects = effectsPath(config, db, logger);
  const feed = new OutboxFeed(db, [history, ...(effects ? [effects.queue] : [])], logger);
  feed.start();
  effects?.queue.start(effects.handler);
  const maintenance = everyHour(logger, [() => feed.prune(), () => history.prune(), () => pruneEffectRecords(db)]);
  return {
    wake: () => feed.wake(),
    redrive: async (options) => {
      if (!effects) throw new ConfigError('effects are off (EFFECTS_WEBHOOK_URL is not set)');
      return redrive(effects.deadLetters, (letter) => effects.queue.send([JSON.parse(letter.record)], { redriven: true }), options);
    },
    stop: async () => {
      clearInterval(maintenance);
      await feed.stop();
      await effects?.queue.stop();
    },
  };
}

/**
 * The effects path, as in AWS: the outbox (the table's stream), filtered to
 * state changes -> the per-operation effects queue -> the effects handler ->
 * the outbound webhook. Off without EFFECTS_WEBHOOK_URL.
 */
function effectsPath(config: Config, db: Sqlite, logger: Logger) {
  if (!config.EFFECTS_WEBHOOK_URL) return undefined;
  if (!config.EFFECTS_SIGNING_SECRET) throw new ConfigError('EFFECTS_WEBHOOK_URL needs EFFECTS_SIGNING_SECRET (whsec_...)');
  const [secret] = parseSigningSecrets(config.EFFECTS_SIGNING_SECRET);
  const queue = new SqliteEffectsQueue(db, { logger });
  const ledger = new SqliteEffectLedger(db);
  const deadLetters = new SqliteDeadLetters(db);
  const sink = new WebhookSink(config.EFFECTS_WEBHOOK_URL, secret as string, {
    timeoutMs: config.EFFECTS_WEBHOOK_TIMEOUT_MS,
    post: pooledPost(config.EFFECTS_WEBHOOK_URL, config.EFFECTS_WEBHOOK_CONNECTIONS),
  });
  const handler = createEffectsHandler({ sinks: [sink], ledger, deadLetters, queue, retry: retrySettings(config), logger });
  return { queue, deadLetters, handler };
}

/** What each part keeps past its retention goes, at start and hourly (DynamoDB's TTL, on this engine). */
export function everyHour(logger: Logger, tasks: Array<() => unknown>): NodeJS.Timeout {
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

/** Messages between the runtime and its derived-work process. */
export type ToChild =
  | { type: 'start'; dbFile: string; config: Config }
  | { type: 'wake' }
  | { type: 'redrive'; id: number; options: RedriveOptions }
  | { type: 'stop' };
export type ToParent =
  | { type: 'ready' }
  | { type: 'redriven'; id: number; result: RedriveResult }
  | { type: 'redrive-failed'; id: number; message: string };

const RESTART_MS = 500;
const RESTART_CAP_MS = 30_000;

/**
 * The derived work in a child process on `dbFile`, restarted when it dies
 * (after 0.5 s, doubling to 30 s while it keeps dying at start). Resolves
 * once the first one is running.
 */
export async function startDerivedProcess(
  dbFile: string,
  config: Config,
  logger: Logger,
): Promise<DerivedWork & { pid(): number | undefined }> {
  const script = derivedProcessScript();
  // In a checkout the script is TypeScript: run through tsx, from the checkout (where tsx is installed).
  const typescript = script.pathname.endsWith('.ts');
  let child: ChildProcess | undefined;
  let stopping = false;
  let restartMs = RESTART_MS;
  let wakePending = false;
  let nextId = 0;
  const waiting = new Map<number, { resolve: (r: RedriveResult) => void; reject: (e: Error) => void }>();

  const spawnChild = () =>
    new Promise<void>((ready, failed) => {
      const started = Date.now();
      const one = fork(fileURLToPath(script), [], {
        execArgv: typescript ? ['--import', 'tsx'] : [],
        ...(typescript && { cwd: fileURLToPath(new URL('../..', script)) }),
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        serialization: 'json',
      });
      child = one;
      // The configuration travels by the channel, not the environment: it holds the effects secret.
      one.send({ type: 'start', dbFile, config });
      one.on('message', (message: ToParent) => {
        if (message.type === 'ready') {
          ready();
          // A change committed while it was starting: its first drain takes it anyway, but wake it to be sure.
          one.send({ type: 'wake' } satisfies ToChild);
          return;
        }
        const request = waiting.get(message.id);
        waiting.delete(message.id);
        if (message.type === 'redriven') request?.resolve(message.result);
        else request?.reject(new Error(message.message));
      });
      one.once('exit', (code, signal) => {
        if (child === one) child = undefined;
        for (const [id, request] of waiting) {
          waiting.delete(id);
          request.reject(new Error('the effects process stopped before it answered'));
        }
        if (stopping) return;
        failed(new Error(`the effects process exited (${signal ?? code}) before it was ready`));
        restartMs = Date.now() - started > RESTART_CAP_MS ? RESTART_MS : Math.min(RESTART_CAP_MS, restartMs * 2);
        logger.error('effects process exited; restarting it (its work waits in the outbox and the effects queue)', {
          code,
          signal,
          restartInMs: restartMs,
        });
        setTimeout(() => {
          if (!stopping) spawnChild().catch(() => undefined);
        }, restartMs).unref();
      });
    });

  await spawnChild();
  return {
    pid: () => child?.pid,
    wake: () => {
      // One message per turn of the event loop, however many commits it saw.
      if (wakePending) return;
      wakePending = true;
      setImmediate(() => {
        wakePending = false;
        if (child?.connected) child.send({ type: 'wake' } satisfies ToChild);
      });
    },
    redrive: (options) =>
      new Promise((resolve, reject) => {
        if (!child?.connected) return reject(new Error('the effects process is restarting; try again in a moment'));
        const id = ++nextId;
        waiting.set(id, { resolve, reject });
        child.send({ type: 'redrive', id, options } satisfies ToChild);
      }),
    stop: async () => {
      stopping = true;
      const last = child;
      if (!last || last.exitCode !== null) return;
      const exited = new Promise((resolve) => last.once('exit', resolve));
      if (last.connected) last.send({ type: 'stop' } satisfies ToChild);
      const killer = setTimeout(() => last.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** derived-process.ts beside this file in a checkout; the package's own `derived-process.js` entry once built. */
function derivedProcessScript(): URL {
  if (import.meta.url.endsWith('.ts')) return new URL('./derived-process.ts', import.meta.url);
  for (const candidate of ['./derived-process.js', '../derived-process.js']) {
    const url = new URL(candidate, import.meta.url);
    if (existsSync(url)) return url;
  }
  throw new Error('derived-process.js is missing from this installation');
}
