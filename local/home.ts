/**
 * Which engine `ratchet start` and `createRatchet` run on, chosen from the
 * configuration and reached through its index.ts only (the Engine port,
 * app/engine.ts): PostgreSQL where there is a database (DATABASE_URL, or the
 * application's pool; its module loaded only then), else SQLite in DATA_DIR.
 * What each factory takes is resolved here, once: never the whole Config.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Config } from '../app/config.ts';
import type { OnChange } from '../app/effects/app-sink.ts';
import type { Engine, EngineWork } from '../app/engine.ts';
import type { Telemetry } from '../app/telemetry.ts';
import type { PoolLike } from '../engines/postgres/index.ts';
import { openSqlite } from '../engines/sqlite/index.ts';

export interface OpenEngineOptions {
  dataDir: string;
  work: EngineWork;
  logger: Logger;
  /** SQLite: history and the effects in this process, not a process of their own (the library, inside an application). */
  inProcess?: boolean;
  /** The application's own function for each change (the library, in this process). */
  onChange?: OnChange;
  /** PostgreSQL: the application's own pool, instead of DATABASE_URL. */
  pool?: PoolLike;
  /** Where effects' deliveries are counted and traced. */
  telemetry?: Telemetry;
}

export async function openEngine(config: Config, options: OpenEngineOptions): Promise<Engine> {
  const common = {
    work: options.work,
    trackedExpiryDays: config.TRACKED_EXPIRY_DAYS,
    logger: options.logger,
    ...(options.onChange && { onChange: options.onChange }),
    ...(options.telemetry && { telemetry: options.telemetry }),
  };
  if (!config.DATABASE_URL && !options.pool)
    return openSqlite({
      ...common,
      dataDir: options.dataDir,
      ...(options.inProcess && { inProcess: true }),
      // In a checkout, this front end's own entry for the derived-work process (it traces); a package names its one entry.
      ...(import.meta.url.endsWith('.ts') && { derivedProcess: new URL('./derived-process.ts', import.meta.url) }),
    });
  const { openPostgres } = await import('../engines/postgres/index.ts');
  return openPostgres({
    ...common,
    ...(options.pool ? { pool: options.pool } : { url: config.DATABASE_URL }),
    ...(config.DATABASE_LISTEN_URL && { listenUrl: config.DATABASE_LISTEN_URL }),
    schema: config.DATABASE_SCHEMA,
    poolMax: config.DATABASE_POOL_MAX,
    timeouts: { statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS, connectTimeoutMs: config.DATABASE_CONNECT_TIMEOUT_MS },
    migrate: config.DATABASE_MIGRATE === 'on',
    effectsLeaseMs: config.EFFECTS_LEASE_SECONDS * 1000,
  });
}
