/**
 * The PostgreSQL engine's one factory: a connection (DATABASE_URL, or the
 * application's pool), the schema migrated (or checked, for a role that may
 * not change it), and on it every port the application needs (app/ports.ts):
 * the operation store with its queries, schedule, decisions and receipts;
 * history; the effects ledger and dead letters; the change log by cursor.
 */
import { connect, MIGRATION_TIMEOUT_MS, type Postgres, type PostgresOptions } from './database.ts';
import { PostgresOperationStore, type PostgresStoreOptions } from './operation-store.ts';
import { PostgresDeadLetters, PostgresEffectLedger, PostgresHistory } from './records.ts';
import { migrate, requireCurrent } from './schema.ts';

export interface PostgresEngineOptions extends PostgresOptions, Omit<PostgresStoreOptions, 'effects'> {
  /** Whether each state change queues its effect (default false). */
  effects?: boolean;
  /** Migrate the schema at start (default), or only check it is current (`ratchet migrate` ran with another role). */
  migrate?: boolean;
}

export interface PostgresEngine {
  db: Postgres;
  store: PostgresOperationStore;
  history: PostgresHistory;
  ledger: PostgresEffectLedger;
  deadLetters: PostgresDeadLetters;
  close(): Promise<void>;
}

export async function openPostgresEngine(options: PostgresEngineOptions): Promise<PostgresEngine> {
  const db = connect(options);
  try {
    if (options.migrate === false) await requireCurrent(db);
    else await migrate(db.withStatementTimeout(MIGRATION_TIMEOUT_MS));
  } catch (error) {
    await db.close();
    throw error;
  }
  return {
    db,
    store: new PostgresOperationStore(db, { ...options, effects: options.effects ?? false }),
    history: new PostgresHistory(db, options.historyRetentionDays),
    ledger: new PostgresEffectLedger(db),
    deadLetters: new PostgresDeadLetters(db),
    close: () => db.close(),
  };
}
