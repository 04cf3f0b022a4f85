/**
 * `ratchet start` on PostgreSQL (DATABASE_URL): the engine on one schema that
 * any number of instances share (engines/postgres), with what runs beside the
 * API in each of them: the change feed woken by this instance's commits, by
 * other instances' NOTIFY (LISTEN on DATABASE_LISTEN_URL, else DATABASE_URL)
 * and by a short poll; the effects queue, delivered by whichever instance
 * claims an effect; the hourly chores on one instance at a time. History needs
 * nothing here: it is written with each change.
 */

import { type Config, ConfigError } from '../app/config.ts';
import { deliverEffect } from '../app/effects/deliver.ts';
import { redrive } from '../app/effects/redrive.ts';
import { networkFailureInWords } from '../core/network.ts';
import { PostgresAppSink } from '../engines/postgres/app-sink.ts';
import { PostgresChangeFeed } from '../engines/postgres/change-feed.ts';
import { pruneChanges } from '../engines/postgres/change-log.ts';
import { type Deliver, PostgresEffectsQueue, pendingEffects, retryingOperations } from '../engines/postgres/effects-queue.ts';
import { type DatabasePlace, databaseFailure, placeOf } from '../engines/postgres/failures.ts';
import { openPostgresEngine, type PostgresEngine } from '../engines/postgres/index.ts';
import { claimJob } from '../engines/postgres/leases.ts';
import { type Listener, listen, notifier } from '../engines/postgres/listener.ts';
import { pruneEffectRecords } from '../engines/postgres/records.ts';
import { PostgresSignIns, pruneSignIns } from '../engines/postgres/sign-ins.ts';
import { type EffectsRecords, type Home, type HomeOptions, HomeUnavailableError } from './home.ts';
import { webhookSinkOf } from './outbound-pool.ts';

export async function openPostgresHome(config: Config, options: HomeOptions): Promise<Home> {
  const { logger } = options;
  const url = config.DATABASE_URL;
  const place = placeOf(url, config.DATABASE_SCHEMA);
  const { where } = place;
  const label = `PostgreSQL (schema ${config.DATABASE_SCHEMA} of ${url ? where.replace(/\?.*$/, '') : "the application's pool"})`;
  let feed: PostgresChangeFeed | undefined;
  let queue: PostgresEffectsQueue | undefined;
  let announce: () => void = () => {};
  let engine: PostgresEngine;
  try {
    engine = await openPostgresEngine({
      ...(options.pool ? { pool: options.pool } : { url }),
      schema: config.DATABASE_SCHEMA,
      maxConnections: config.DATABASE_POOL_MAX,
      migrate: config.DATABASE_MIGRATE === 'on',
      historyRetentionDays: options.historyRetentionDays,
      effects: Boolean(options.derived.effects),
      onChange: () => {
        feed?.notify();
        queue?.wake();
        announce();
      },
      onPollingStopped: () => feed?.notify(),
    });
  } catch (error) {
    throw unavailable(error, place);
  }
  const { db, store } = engine;
  announce = notifier(db);
  feed = new PostgresChangeFeed(db);
  const changesRetentionMs = options.derived.changesRetentionMs;
  const instance = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const effectsSettings = options.derived.effects;
  const effects: EffectsRecords | undefined = effectsSettings && {
    ledger: engine.ledger,
    deadLetters: engine.deadLetters,
    pending: (name) => pendingEffects(db, name),
    retrying: () => retryingOperations(db),
  };
  if (!effects) logger.info('effects off: EFFECTS_WEBHOOK_URL is not set');
  // The queue and its delivery exist from the start (a tick drains them, redrive refills them); its timers only with start().
  let deliver: Deliver | undefined;
  if (effectsSettings) {
    const sinks = [
      ...(effectsSettings.sink ? [webhookSinkOf(effectsSettings.sink)] : []),
      ...(options.onChange ? [new PostgresAppSink(db, options.onChange)] : []),
    ];
    const deps = { sinks, ledger: engine.ledger, deadLetters: engine.deadLetters, retry: effectsSettings.retry, logger };
    queue = new PostgresEffectsQueue(db, { logger, leaseMs: config.EFFECTS_LEASE_SECONDS * 1000 });
    deliver = (effect) => deliverEffect(effect, deps);
  }
  let listener: Listener | undefined;
  return {
    label,
    where,
    store,
    history: engine.history,
    changes: feed,
    health: async () => {
      try {
        await db.rows('SELECT 1');
        return 'ok';
      } catch (error) {
        return { unavailable: databaseFailure(error, place)?.message ?? `the database does not answer (${networkFailureInWords(error)})` };
      }
    },
    effects,
    redrive: async (redriveOptions) => {
      if (!queue) throw new Error('effects are off (EFFECTS_WEBHOOK_URL is not set)');
      const active = queue;
      return redrive(engine.deadLetters, (letter) => active.send([letter.transition], { redriven: true }), redriveOptions);
    },
    claimJob: (job, forMs) => claimJob(db, job, instance, forMs),
    signIns: new PostgresSignIns(db),
    maintenance: [
      () => store.pruneDecisions(),
      async () => {
        const deleted = await store.deleteUnseen(options.trackedExpiryDays * 2 * 86_400_000);
        if (deleted > 0) logger.info(`maintenance: ${deleted} operation(s) tracked but never observed for 2 × TRACKED_EXPIRY_DAYS deleted`);
      },
      () => engine.history.prune(),
      () => pruneChanges(db, changesRetentionMs),
      () => pruneEffectRecords(db),
      () => pruneSignIns(db),
    ],
    drainEffects: async (budgetMs) => (queue && deliver ? queue.drain(deliver, Date.now() + budgetMs) : 0),
    start: async () => {
      // LISTEN needs a session of its own: DATABASE_LISTEN_URL, else DATABASE_URL; with only the application's pool, polling.
      const listenUrl = config.DATABASE_LISTEN_URL ?? url;
      if (listenUrl)
        listener = listen(
          listenUrl,
          config.DATABASE_SCHEMA,
          () => {
            feed?.notify();
            queue?.wake();
          },
          (error) => logger.warn('database: LISTEN connection lost; polling meanwhile', { detail: networkFailureInWords(error) }),
        );
      if (queue && deliver) queue.start(deliver);
    },
    announce: () => {},
    close: async () => {
      await queue?.stop();
      feed?.close();
      await listener?.close();
      await engine.close();
    },
  };
}

/** Why the database cannot be used, in one line that names it (never its password): a setting to change is a ConfigError (exit 2). */
function unavailable(error: unknown, place: DatabasePlace): Error {
  const failure = databaseFailure(error, place);
  if (!failure) return error as Error;
  return failure.kind === 'configuration' ? new ConfigError(failure.message, failure.setting) : new HomeUnavailableError(failure.message);
}
