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
import { ConfigError } from '../../app/config.ts';
import { deliverEffect } from '../../app/effects/deliver.ts';
import { webhookSinkOf } from '../../app/effects/pooled-post.ts';
import { type RedriveOptions, redrive } from '../../app/effects/redrive.ts';
import type { EffectSink } from '../../app/effects/sinks.ts';
import type { EngineWork, RedriveResult } from '../../app/engine.ts';
import { everyHour } from '../../app/schedule.ts';
import type { Telemetry } from '../../app/telemetry.ts';
import { SqliteEffectsQueue } from './effects-queue.ts';
import { pruneEffectRecords, SqliteDeadLetters, SqliteEffectLedger } from './effects-records.ts';
import { SqliteHistory } from './history.ts';
import { OutboxFeed } from './outbox.ts';
import type { Sqlite } from './sqlite.ts';

export type { RedriveResult };

export interface DerivedWork {
  /** An applied write committed: its changes are waiting in the outbox. */
  wake(): void;
  /** Re-queues dead letters (`npm run redrive`, the console's button). */
  redrive(options: RedriveOptions): Promise<RedriveResult>;
  stop(): Promise<void>;
}

/** What the derived work is given: the engine's work settings, resolved once by the front end (and sent as they are to its process). */
export type DerivedWorkOptions = EngineWork;

/**
 * The feed, history and (with an outbound webhook, or the application's
 * `onChange` in `sinks`) the effects path, on `db`, in this process.
 */
export function startDerivedWork(
  db: Sqlite,
  options: DerivedWorkOptions,
  logger: Logger,
  sinks: EffectSink[] = [],
  telemetry?: Telemetry,
): DerivedWork {
  const history = new SqliteHistory(db, logger, options.historyRetentionDays);
  const effects = options.effects && effectsPath(options.effects, db, { logger, others: sinks, telemetry });
  const feed = new OutboxFeed(db, [history, ...(effects ? [effects.queue] : [])], logger, options.changesRetentionMs);
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
function effectsPath(
  { sink: settings, retry }: NonNullable<DerivedWorkOptions['effects']>,
  db: Sqlite,
  { logger, others, telemetry }: { logger: Logger; others: EffectSink[]; telemetry: Telemetry | undefined },
) {
  const ledger = new SqliteEffectLedger(db);
  const deadLetters = new SqliteDeadLetters(db);
  const queue = new SqliteEffectsQueue(db, {
    logger,
    parkUndecodable: (undecodable, reason) => deadLetters.parkUndecodable(undecodable, reason),
  });
  const sinks = [...(settings ? [webhookSinkOf(settings)] : []), ...others];
  const deps = { sinks, ledger, deadLetters, retry, logger, ...(telemetry && { telemetry }) };
  return { queue, deadLetters, deliver: (effect: Parameters<typeof deliverEffect>[0]) => deliverEffect(effect, deps) };
}
