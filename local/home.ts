/**
 * Where `ratchet start` keeps its state, and what runs beside its API there:
 * the engine it opens and the work that goes with it. Two homes:
 * - SQLite (default): one file in DATA_DIR, held by this process alone;
 *   history and effects in a derived-work process of their own (derived-*.ts);
 * - PostgreSQL (DATABASE_URL): one schema any number of instances share;
 *   history and effects are written with each change, the effects queue is
 *   delivered by whichever instance claims it (home-postgres.ts, loaded only then).
 * The runtime (runtime.ts) wires either to the same API, console and reconcile.
 */
import { resolve } from 'node:path';
import type { Logger } from '@aws-lambda-powertools/logger';
import { CallbackSink, type OnChange } from '../app/effects/app-sink.ts';
import type { DeadLetters } from '../app/effects/dead-letters.ts';
import type { RedriveOptions } from '../app/effects/redrive.ts';
import type { ChangeFeedPort } from '../app/feed.ts';
import type { HistoryLog } from '../app/history.ts';
import type {
  DecisionLog,
  DeliveryReceipts,
  OperationQueries,
  OperationStore,
  PollRequests,
  PollSchedule,
  SignInStore,
  StoreHealth,
  UnprocessableLog,
} from '../app/ports.ts';
import type { PoolLike } from '../engines/postgres/database.ts';
import { pendingEffects, retryingOperations } from '../engines/sqlite/effects-queue.ts';
import { openSqliteEngine } from '../engines/sqlite/index.ts';
import { backlogOf } from '../engines/sqlite/outbox.ts';
import type { ConsoleEffects, ConsoleStore } from './console/console.ts';
import { startDerivedProcess } from './derived-supervisor.ts';
import type { DerivedWork, DerivedWorkOptions, RedriveResult } from './derived-work.ts';

export const IN_MEMORY = ':memory:';

/** The home cannot be opened as configured (the database unreachable, refusing the role, or a schema of another version): one line. */
export class HomeUnavailableError extends Error {
  override name = 'HomeUnavailableError';
}

export type HomeStore = OperationStore &
  OperationQueries &
  PollSchedule &
  PollRequests &
  DeliveryReceipts &
  DecisionLog &
  UnprocessableLog &
  ConsoleStore & {
    pruneDecisions(): unknown;
    /** Operations tracked longer than `olderThanMs` and never observed, deleted: how many. */
    deleteUnseen(olderThanMs: number): number | Promise<number>;
  };

/** What the console and the effects admin routes read of the effects; undefined while the outbound sink is off. */
export type EffectsRecords = ConsoleEffects & { deadLetters: DeadLetters };

export interface Home {
  /** The engine and where, in words: `SQLite (./.ratchet-data/ratchet.db)`, `PostgreSQL (schema ratchet)`. */
  label: string;
  /** The SQLite file, or the PostgreSQL schema's name in words. */
  where: string;
  store: HomeStore;
  history: HistoryLog;
  changes: ChangeFeedPort;
  health(): Promise<StoreHealth>;
  effects: EffectsRecords | undefined;
  redrive(options: RedriveOptions): Promise<RedriveResult>;
  /**
   * Claims a timed job (discovery, the webhook health check, pruning) for
   * `forMs`: true when this instance is to run it now. Absent where one process
   * is all there is.
   */
  claimJob?: (job: string, forMs: number) => Promise<boolean>;
  /** Where the console's sessions live when instances share them (PostgreSQL); absent: this process's memory. */
  signIns?: SignInStore;
  /** The hourly pruning this engine needs. */
  maintenance: Array<() => unknown>;
  /**
   * Delivers the effects that are due, within `budgetMs`, without timers (a
   * cron's tick): how many deliveries were settled. Absent where the effects
   * run on their own from the start (SQLite).
   */
  drainEffects?: (budgetMs: number) => Promise<number>;
  /** Starts the work beside the API (history, the effects queue). */
  start(): Promise<void>;
  /** The server listens: say so where the engine keeps such notes (the data folder's `url`). */
  announce(url: string): void;
  /** Stops what it started and closes the engine; `failed`: the start did not finish (a data folder it created goes). */
  close(failed: boolean): Promise<void>;
}

export interface HomeOptions {
  dataDir: string;
  historyRetentionDays: number;
  trackedExpiryDays: number;
  derived: DerivedWorkOptions;
  logger: Logger;
  /** SQLite: history and the effects in this process, not a process of their own (the library, inside an application). */
  inProcess?: boolean;
  /** The application's own function for each change (the library, in this process). */
  onChange?: OnChange;
  /** PostgreSQL: the application's own pool, instead of DATABASE_URL. */
  pool?: PoolLike;
}

/** The data folder's SQLite file, its derived work in a process of its own (in this one with `:memory:`). */
export function openSqliteHome(options: HomeOptions): Home {
  const { logger } = options;
  let derived: DerivedWork | undefined;
  const engine = openSqliteEngine({
    dataDir: options.dataDir,
    historyRetentionDays: options.historyRetentionDays,
    logger,
    onCommit: () => derived?.wake(),
  });
  const { data, store } = engine;
  const { db } = data;
  if (data.tightened.length > 0)
    logger.warn(`data folder: brought to owner-only (0700 for the folder, 0600 for its files): ${data.tightened.join(', ')}`);
  if (data.dynamoDbLocalLeftover)
    logger.warn(
      `${data.dynamoDbLocalLeftover} holds data of the DynamoDB Local runtime (before the embedded engine); it is left as it is and not read`,
    );
  // Reads only, here: history and the effects' records are written by the derived work (derived-work.ts).
  const effects: EffectsRecords | undefined = options.derived.effects && {
    ledger: engine.ledger,
    deadLetters: engine.deadLetters,
    pending: (name) => pendingEffects(db, name),
    retrying: () => retryingOperations(db),
  };
  if (!effects) logger.info('effects off: EFFECTS_WEBHOOK_URL is not set');
  return {
    label: `SQLite (${db.path})`,
    where: db.path,
    store,
    history: engine.history,
    changes: engine.changes,
    health: engine.health,
    effects,
    redrive: (redriveOptions) => {
      if (!derived) throw new Error('the effects process is not running');
      return derived.redrive(redriveOptions);
    },
    maintenance: [
      () => store.pruneDecisions(),
      () => {
        const deleted = store.deleteUnseen(options.trackedExpiryDays * 2 * 86_400_000);
        if (deleted > 0) logger.info(`maintenance: ${deleted} operation(s) tracked but never observed for 2 × TRACKED_EXPIRY_DAYS deleted`);
      },
    ],
    start: async () => {
      if (effects) {
        const backlog = backlogOf(db, 'effects', 'state-change');
        if (backlog !== undefined)
          logger.warn(
            `outbound sink: first start: the ${backlog} state change(s) still in the outbox (it keeps a day) are delivered first, then new ones`,
            { backlog },
          );
      }
      // History, the effects queue and the outbound webhook: a process of their own on a data file.
      derived =
        db.path === IN_MEMORY || options.inProcess
          ? (await import('./derived-work.ts')).startDerivedWork(
              db,
              options.derived,
              logger,
              options.onChange ? [new CallbackSink(options.onChange)] : [],
            )
          : startDerivedProcess(resolve(db.path), options.derived, logger);
    },
    announce: (url) => data.announce(url),
    close: async (failed) => {
      await derived?.stop();
      if (failed) data.discard();
      else data.close();
    },
  };
}
