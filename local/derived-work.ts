/**
 * Everything the embedded engine derives from the outbox, apart from the
 * thread that answers webhooks: the outbox feed to history and the effects
 * queue, the effects handler with its outbound webhook, and their hourly
 * pruning. The ingest thread only verifies, reduces and commits (the
 * operation and its outbox row, in one transaction), then wakes this.
 *
 * On a data file it runs in a child process of its own (derived-process.ts,
 * started and restarted by derived-supervisor.ts) with its own SQLite
 * connection on the same WAL file, so delivering effects never takes a turn of
 * the ingest thread's event loop. With `DATA_DIR=:memory:` there is no file to
 * share: it runs in the runtime's process.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Config } from '../app/config.ts';
import { ConfigError } from '../app/config.ts';
import { deliverEffect } from '../app/effects/deliver.ts';
import { retrySettings } from '../app/effects/queue.ts';
import { type RedriveOptions, redrive } from '../app/effects/redrive.ts';
import { WebhookSink } from '../app/effects/webhook-sink.ts';
import { parseSigningSecrets } from '../app/http/webhook-signature.ts';
import { SqliteEffectsQueue } from '../engines/sqlite/effects-queue.ts';
import { pruneEffectRecords, SqliteDeadLetters, SqliteEffectLedger } from '../engines/sqlite/effects-records.ts';
import { SqliteHistory } from '../engines/sqlite/history.ts';
import { OutboxFeed } from '../engines/sqlite/outbox.ts';
import type { Sqlite } from '../engines/sqlite/sqlite.ts';
import { pooledPost } from './outbound-pool.ts';
import { everyHour } from './schedule.ts';

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
  const feed = new OutboxFeed(db, [history, ...(effects ? [effects.queue] : [])], logger, config.CHANGES_RETENTION_HOURS * 3_600_000);
  feed.start();
  effects?.queue.start(effects.deliver);
  const maintenance = everyHour(logger, [() => feed.prune(), () => history.prune(), () => pruneEffectRecords(db)]);
  return {
    wake: () => feed.wake(),
    redrive: async (options) => {
      if (!effects) throw new ConfigError('effects are off (EFFECTS_WEBHOOK_URL is not set)');
      return redrive(effects.deadLetters, (letter) => effects.queue.send([letter.transition], { redriven: true }), options);
    },
    stop: async () => {
      clearInterval(maintenance);
      await feed.stop();
      await effects?.queue.stop();
    },
  };
}

/**
 * The effects path: the outbox, filtered to state changes -> the
 * per-operation effects queue -> the application's delivery -> the outbound
 * webhook. Off without EFFECTS_WEBHOOK_URL.
 */
function effectsPath(config: Config, db: Sqlite, logger: Logger) {
  if (!config.EFFECTS_WEBHOOK_URL) return undefined;
  // The runtime checked both before it started this (effectsRecords in local/runtime.ts).
  const [secret] = parseSigningSecrets(config.EFFECTS_SIGNING_SECRET as string);
  const ledger = new SqliteEffectLedger(db);
  const deadLetters = new SqliteDeadLetters(db);
  const queue = new SqliteEffectsQueue(db, {
    logger,
    parkUndecodable: (undecodable, reason) => deadLetters.parkUndecodable(undecodable, reason),
  });
  const sink = new WebhookSink(config.EFFECTS_WEBHOOK_URL, secret as string, {
    timeoutMs: config.EFFECTS_WEBHOOK_TIMEOUT_MS,
    post: pooledPost(config.EFFECTS_WEBHOOK_URL, config.EFFECTS_WEBHOOK_CONNECTIONS),
  });
  const deps = { sinks: [sink], ledger, deadLetters, retry: retrySettings(config), logger };
  return { queue, deadLetters, deliver: (effect: Parameters<typeof deliverEffect>[0]) => deliverEffect(effect, deps) };
}
