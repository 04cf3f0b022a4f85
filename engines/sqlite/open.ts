/**
 * The SQLite engine's parts, opened on a data folder (one SQLite file, locked
 * to this process): the operation store with its queries, schedule, decisions
 * and receipts; the change feed its writes wake; history; the effects ledger
 * and dead letters; the health probe. What runs beside them (history and the
 * effects queue fed from the outbox) is the derived work's (derived-work.ts),
 * on a connection of its own. engine.ts (openSqlite) puts it all behind the
 * Engine port.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { ChangeFeedPort } from '../../app/feed.ts';
import type { StoreHealth } from '../../app/ports.ts';
import { ChangeFeed, feedPort } from './change-feed.ts';
import { type OpenedData, openDataFolder } from './data-folder.ts';
import { SqliteDeadLetters, SqliteEffectLedger } from './effects-records.ts';
import { writeProbe } from './health.ts';
import { SqliteHistory } from './history.ts';
import { SqliteOperationStore } from './operation-store.ts';

export interface SqliteEngineOptions {
  /** The data folder (`:memory:` for a database that lives as long as the process). */
  dataDir: string;
  historyRetentionDays: number;
  logger: Pick<Logger, 'warn'>;
  /** After each commit that applied a write (the derived work is woken by it). */
  onCommit?: () => void;
}

export interface SqliteEngine {
  data: OpenedData;
  store: SqliteOperationStore;
  feed: ChangeFeed;
  /** The feed as the application's port (text cursors), for the routes and the console. */
  changes: ChangeFeedPort;
  history: SqliteHistory;
  ledger: SqliteEffectLedger;
  deadLetters: SqliteDeadLetters;
  health: () => Promise<StoreHealth>;
}

export function openSqliteEngine(options: SqliteEngineOptions): SqliteEngine {
  const data = openDataFolder(options.dataDir);
  const { db } = data;
  const feed = new ChangeFeed(db);
  const store = new SqliteOperationStore(
    db,
    () => {
      options.onCommit?.();
      feed.notify();
    },
    (name) => feed.wake(name),
  );
  return {
    data,
    store,
    feed,
    changes: feedPort(feed),
    history: new SqliteHistory(db, options.logger, options.historyRetentionDays),
    ledger: new SqliteEffectLedger(db),
    deadLetters: new SqliteDeadLetters(db),
    health: writeProbe(db),
  };
}
