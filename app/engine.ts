/**
 * The Engine port: everything an engine serves the front ends (`ratchet
 * start`, `createRatchet`): the operation store with its queries, schedule,
 * decisions and receipts; history; the change feed; the effects queue with
 * its ledger and dead letters; the console's reads; sign-ins; health; and the
 * work that runs beside the API (the effects queue, pruning). One factory per
 * engine returns all of it from resolved options (EngineOptions, never the
 * whole configuration): `engines/sqlite` and `engines/postgres`, each reached
 * through its `index.ts` only. docs/design.md says how to add one.
 *
 * (The AWS shape keeps its own composition: DynamoDB's ports are wired per
 * Lambda function, lambda/handlers/*.)
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { OperationKind, OperationState } from '../core/lifecycle.ts';
import type { OnChange } from './effects/app-sink.ts';
import type { DeadLetters } from './effects/dead-letters.ts';
import type { DeliveryAttempts } from './effects/ledger.ts';
import type { RetrySettings } from './effects/queue.ts';
import type { RedriveOptions, redrive } from './effects/redrive.ts';
import type { WebhookSinkSettings } from './effects/webhook-sink.ts';
import type { ChangeFeedPort } from './feed.ts';
import type { HistoryLog } from './history.ts';
import type {
  Decision,
  DecisionLog,
  DeliveryReceipts,
  OperationQueries,
  OperationStore,
  OperationView,
  OverdueWatch,
  PollRequests,
  PollSchedule,
  SignInStore,
  StoreHealth,
  UnprocessableLog,
} from './ports.ts';
import type { Telemetry } from './telemetry.ts';

/** An engine's answer, at once (SQLite) or later (PostgreSQL). */
type Awaitable<T> = T | Promise<T>;

/** One effect waiting in an operation's queue: its version, failed attempts so far, when it is tried next, the last failure. */
export interface PendingEffectView {
  version: number | undefined;
  receiveCount: number;
  retryAt: number;
  lastError: string | null;
}

/** Operations of one state and kind: how many, how many of them are open and marked overdue, and since when the oldest open one was tracked. */
export interface OperationCounts {
  state: OperationState | null;
  kind: OperationKind;
  count: number;
  overdue: number;
  /** The `createdAt` of the oldest of them that is open (null: none is). */
  oldestOpenSince: string | null;
}

/** What the console (and `/metrics`) reads of an engine beside the ports: counts per state and kind, and its own list. */
export interface ConsoleStore {
  /** Per state and kind, in one pass over the operations. */
  counts(): Awaitable<OperationCounts[]>;
  consoleList(filter: {
    /** Only open jobs marked overdue. */
    overdue?: boolean;
    state?: OperationState | null;
    open?: boolean;
    kind?: OperationKind;
    names?: string[];
    limit: number;
    offset: number;
  }): Awaitable<OperationView[]>;
  describe(name: string): Promise<OperationView | undefined>;
  decisions(name: string): Promise<Decision[]>;
}

/** What the console reads of the effects path; undefined while the outbound sink is off. */
export interface ConsoleEffects {
  deadLetters: DeadLetters;
  pending: (name: string) => Awaitable<PendingEffectView[]>;
  ledger: { delivery(sink: string, key: string): Awaitable<DeliveryAttempts | undefined> };
  /** The operations whose effect failed at least once and waits to be tried again. */
  retrying: () => Awaitable<string[]>;
  /** Per sink, in one read: effects it has not taken yet, those of them whose last attempt failed, and dead letters it has not taken (`/metrics`). */
  backlog: () => Awaitable<EffectBacklog[]>;
}

export interface EffectBacklog {
  sink: string;
  pending: number;
  retrying: number;
  deadLettered: number;
}

export type EngineStore = OperationStore &
  OperationQueries &
  PollSchedule &
  OverdueWatch &
  PollRequests &
  DeliveryReceipts &
  DecisionLog &
  UnprocessableLog &
  ConsoleStore & {
    pruneDecisions(): unknown;
    /** Operations tracked longer than `olderThanMs` and never observed, deleted: how many. */
    deleteUnseen(olderThanMs: number): number | Promise<number>;
  };

/** What the console and the effects admin routes read of the effects; undefined while the effects are off. */
export type EffectsRecords = ConsoleEffects & { deadLetters: DeadLetters };

export type RedriveResult = Awaited<ReturnType<typeof redrive>>;

/** The engine cannot be opened as configured (the database unreachable, refusing the role, a schema of another version): one line. */
export class EngineUnavailableError extends Error {
  override name = 'EngineUnavailableError';
}

export interface Engine {
  /** The engine and where, in words: `SQLite (./.ratchet-data/ratchet.db)`, `PostgreSQL (schema ratchet of …)`. */
  label: string;
  /** The SQLite file, or the PostgreSQL schema's place in words. */
  where: string;
  /**
   * The time every instance on this engine agrees on, for what the
   * application stamps and compares (next polls, recordedAt, overdue ages):
   * PostgreSQL's own clock, as each instance reads it. Absent: this process's
   * clock (one process holds the data, or the cloud keeps its clocks).
   */
  clock?: () => Date;
  store: EngineStore;
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
  /** Where the console's sessions live when instances share them (PostgreSQL); absent: the front end's memory. */
  signIns?: SignInStore;
  /** The hourly pruning this engine needs. */
  maintenance: Array<() => unknown>;
  /**
   * Delivers the effects that are due, within `budgetMs`, without timers (a
   * cron's tick): how many deliveries were settled. Absent where the effects
   * run on their own from the start (SQLite).
   */
  drainEffects?: (budgetMs: number) => Promise<number>;
  /**
   * When the work beside the API must run, as the instance (app/instance.ts)
   * reads it: `on-open` where only this process can do it and nothing does it
   * otherwise (SQLite: history and the effects are derived from the outbox of
   * the one file this process owns); `when-resident` where a process that
   * stays up runs it on timers and a cron's tick does the same without them
   * (`drainEffects`; PostgreSQL).
   */
  starts: 'on-open' | 'when-resident';
  /** Starts the work beside the API (history, the effects queue, wake-ups): called by the instance only. */
  start(): Promise<void>;
  /** The server listens: say so where the engine keeps such notes (the data folder's `url`). */
  announce(url: string): void;
  /** Stops what it started and closes the engine; `failed`: the start did not finish (a data folder it created goes). */
  close(failed: boolean): Promise<void>;
}

/** What runs beside the store, resolved once from the configuration (and sent as it is to SQLite's effects process). */
export interface EngineWork {
  historyRetentionDays: number;
  changesRetentionMs: number;
  /**
   * The effects path's retry policy and its outbound webhook; absent, the
   * effects path is off. Without `sink`, only the application's `onChange`
   * takes effects (the library, in its own process).
   */
  effects?: { sink?: WebhookSinkSettings; retry: RetrySettings };
}

/** What every engine's factory is given. */
export interface EngineOptions {
  work: EngineWork;
  /** Operations tracked and never observed are deleted after twice this. */
  trackedExpiryDays: number;
  logger: Logger;
  /** The application's own function for each change (the library, in this process). */
  onChange?: OnChange;
  /** Where each effect's delivery is counted and traced (`/metrics`, OpenTelemetry). */
  telemetry?: Telemetry;
}

/** The store's own hourly chores, the same on every engine: old decisions pruned, tracked names never observed deleted. */
export function storeMaintenance(store: EngineStore, options: Pick<EngineOptions, 'trackedExpiryDays' | 'logger'>): Array<() => unknown> {
  return [
    () => store.pruneDecisions(),
    async () => {
      const deleted = await store.deleteUnseen(options.trackedExpiryDays * 2 * 86_400_000);
      if (deleted > 0)
        options.logger.info(`maintenance: ${deleted} operation(s) tracked but never observed for 2 × TRACKED_EXPIRY_DAYS deleted`);
    },
  ];
}
