/**
 * The PostgreSQL engine behind the Engine port (app/engine.ts): one schema
 * that any number of instances share, with what runs beside the API in each
 * of them: the change feed woken by this instance's commits, by
 * other instances' NOTIFY (LISTEN on DATABASE_LISTEN_URL, else DATABASE_URL)
 * and by a short poll; the effects queue, delivered by whichever instance
 * claims an effect; the hourly chores on one instance at a time. History needs
 * nothing here: it is written with each change.
 */

import { ConfigError } from '../../app/config.ts';
import { deliverEffect } from '../../app/effects/deliver.ts';
import { webhookSinkOf } from '../../app/effects/pooled-post.ts';
import { redrive } from '../../app/effects/redrive.ts';
import { type EffectsRecords, type Engine, type EngineOptions, EngineUnavailableError, storeMaintenance } from '../../app/engine.ts';
import { networkFailureInWords } from '../../core/network.ts';
import { PostgresAppSink } from './app-sink.ts';
import { PostgresChangeFeed } from './change-feed.ts';
import { pruneChanges } from './change-log.ts';
import { DatabaseClock } from './clock.ts';
import { allowingLonger, CHORE_TIMEOUT_MS, DEFAULT_TIMEOUTS, type PoolLike, type Timeouts } from './database.ts';
import { type Deliver, effectBacklog, PostgresEffectsQueue, pendingEffects, retryingOperations } from './effects-queue.ts';
import { type DatabasePlace, databaseFailure, placeOf } from './failures.ts';
import { claimJob } from './leases.ts';
import { type Listener, listen, notifier } from './listener.ts';
import { openPostgresEngine, type PostgresEngine } from './open.ts';
import { pruneEffectRecords } from './records.ts';
import { PostgresSignIns, pruneSignIns } from './sign-ins.ts';

export interface PostgresOptions extends EngineOptions {
  /** DATABASE_URL; or `pool`, the application's own. */
  url?: string;
  pool?: PoolLike;
  /** A direct URL for LISTEN (DATABASE_LISTEN_URL; default `url`): with neither, the feed and the effects poll. */
  listenUrl?: string;
  schema: string;
  /** Connections this instance's pool opens at most (DATABASE_POOL_MAX). */
  poolMax: number;
  /** How long a statement and a connection may take (DATABASE_STATEMENT_TIMEOUT_MS, DATABASE_CONNECT_TIMEOUT_MS; default 5 s each). */
  timeouts?: Timeouts;
  /** Migrate at start (default), or only check the schema is current. */
  migrate: boolean;
  /** An effect claim's lease, renewed while its delivery runs (EFFECTS_LEASE_SECONDS). */
  effectsLeaseMs: number;
}

export async function openPostgres(options: PostgresOptions): Promise<Engine> {
  const { logger, url } = options;
  const place = placeOf(url, options.schema);
  const { where } = place;
  const label = `PostgreSQL (schema ${options.schema} of ${url ? where.replace(/\?.*$/, '') : "the application's pool"})`;
  let feed: PostgresChangeFeed | undefined;
  let queue: PostgresEffectsQueue | undefined;
  let announce: () => void = () => {};
  let engine: PostgresEngine;
  try {
    engine = await openPostgresEngine({
      ...(options.pool ? { pool: options.pool } : { url }),
      schema: options.schema,
      maxConnections: options.poolMax,
      timeouts: options.timeouts ?? DEFAULT_TIMEOUTS,
      migrate: options.migrate,
      historyRetentionDays: options.work.historyRetentionDays,
      effects: Boolean(options.work.effects),
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
  // The time every instance on this schema agrees on: leases, due times, recordedAt and overdue ages are read by it.
  const clock = new DatabaseClock(db);
  try {
    await clock.sync();
  } catch (error) {
    await engine.close();
    throw unavailable(error, place);
  }
  announce = notifier(db);
  feed = new PostgresChangeFeed(db);
  const changesRetentionMs = options.work.changesRetentionMs;
  const instance = `${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const effectsSettings = options.work.effects;
  const sinks = effectsSettings
    ? [
        ...(effectsSettings.sink ? [webhookSinkOf(effectsSettings.sink)] : []),
        ...(options.onChange ? [new PostgresAppSink(db, options.onChange)] : []),
      ]
    : [];
  const sinkNames = sinks.map((sink) => sink.name);
  const effects: EffectsRecords | undefined = effectsSettings && {
    ledger: engine.ledger,
    deadLetters: engine.deadLetters,
    pending: (name) => pendingEffects(db, name),
    retrying: () => retryingOperations(db),
    backlog: () => effectBacklog(db, sinkNames),
  };
  // An effect is queued by its change's own transaction: nothing queues later what was written while effects were off.
  if (!effects)
    logger.info(
      'effects off: EFFECTS_WEBHOOK_URL is not set; on PostgreSQL the state changes made meanwhile are never delivered, not even once it is set',
    );
  // The queue and its delivery exist from the start (a tick drains them, redrive refills them); its timers only with start().
  let deliver: Deliver | undefined;
  if (effectsSettings) {
    const deps = {
      sinks,
      ledger: engine.ledger,
      deadLetters: engine.deadLetters,
      retry: effectsSettings.retry,
      logger,
      clock: clock.now,
      ...(options.telemetry && { telemetry: options.telemetry }),
    };
    queue = new PostgresEffectsQueue(db, {
      logger,
      leaseMs: options.effectsLeaseMs,
      sinks: sinkNames,
      clock: () => clock.nowMs(),
      // Each `onChange` holds a pooled connection for its transaction: at most 8 at once, so the webhooks keep theirs.
      concurrency: options.onChange ? 8 : 16,
    });
    // The ledger and the dead letters' hold as the claim read them; the ledger rows written with the settle.
    deliver = (effect, records) => deliverEffect(effect, { ...deps, ...records });
  }
  let listener: Listener | undefined;
  return {
    label,
    where,
    clock: clock.now,
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
    // Each chore's statements may take minutes (a first prune after a long pause), not the hot path's seconds.
    maintenance: [
      ...storeMaintenance(store, options),
      () => engine.history.prune(),
      () => pruneChanges(db, changesRetentionMs),
      () => pruneEffectRecords(db),
      () => pruneSignIns(db),
    ].map((chore) => () => allowingLonger(CHORE_TIMEOUT_MS, async () => chore())),
    drainEffects: async (budgetMs) => (queue && deliver ? queue.drain(deliver, Date.now() + budgetMs) : 0),
    starts: 'when-resident',
    start: async () => {
      clock.start();
      // LISTEN needs a session of its own: DATABASE_LISTEN_URL, else DATABASE_URL; with only the application's pool, polling.
      const listenUrl = options.listenUrl ?? url;
      if (listenUrl)
        listener = listen(
          listenUrl,
          options.schema,
          () => {
            feed?.notify();
            queue?.wake();
          },
          (error) => logger.warn('database: LISTEN connection lost; polling meanwhile', { detail: networkFailureInWords(error) }),
          options.timeouts,
        );
      if (queue && deliver) queue.start(deliver);
    },
    announce: () => {},
    close: async () => {
      clock.stop();
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
  return failure.kind === 'configuration' ? new ConfigError(failure.message, failure.setting) : new EngineUnavailableError(failure.message);
}
