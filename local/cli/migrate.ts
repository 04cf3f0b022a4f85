/**
 * `ratchet migrate`: brings Ratchet's PostgreSQL schema (DATABASE_URL,
 * DATABASE_SCHEMA) to this version and exits, for a deployment whose running
 * role may not change the schema (start those with DATABASE_MIGRATE=off).
 * Safe beside running instances and beside another migrate: the steps run in
 * one transaction under a lock, and a schema already current is left as it is.
 */
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { ConfigError, loadConfig } from '../../app/config.ts';

const command = {
  name: 'ratchet migrate',
  usage: `usage: DATABASE_URL=postgres://… [DATABASE_SCHEMA=ratchet] ratchet migrate
  Brings the schema to this Ratchet's version (creating it when it is new), then exits.
  A schema migrated by a newer Ratchet is refused, changed in nothing.`,
  options: {},
} as const;

parseCommandLine(command);
let config: ReturnType<typeof loadConfig>;
try {
  config = loadConfig();
} catch (error) {
  if (error instanceof ConfigError) usageError(command, error.message);
  throw error;
}
if (!config.DATABASE_URL) usageError(command, 'DATABASE_URL is not set (the SQLite file of ratchet start migrates itself at start)');
const { connect, databaseFailure, MIGRATION_TIMEOUT_MS, migrate, placeOf, SCHEMA_VERSION } = await import(
  '../../engines/postgres/index.ts'
);
const db = connect({
  url: config.DATABASE_URL,
  schema: config.DATABASE_SCHEMA,
  maxConnections: 1,
  timeouts: { statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS, connectTimeoutMs: config.DATABASE_CONNECT_TIMEOUT_MS },
});
try {
  const before = await migrate(db.withStatementTimeout(MIGRATION_TIMEOUT_MS));
  console.log(
    before === SCHEMA_VERSION
      ? `schema ${config.DATABASE_SCHEMA} is at version ${SCHEMA_VERSION} already: nothing to do`
      : `schema ${config.DATABASE_SCHEMA} migrated from version ${before} to ${SCHEMA_VERSION}`,
  );
} catch (error) {
  const said = databaseFailure(error, placeOf(config.DATABASE_URL, config.DATABASE_SCHEMA));
  // A setting to change exits 2, as bad usage does; the database's state exits 1.
  if (said?.kind === 'configuration') {
    console.error(`${command.name}: ${said.message}`);
    process.exit(2);
  }
  failure(command, said?.message ?? ((error as Error).message.split('\n')[0] as string));
} finally {
  await db.close();
}
