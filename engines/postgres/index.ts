/**
 * The PostgreSQL engine, as front ends reach it (they import nothing else of
 * it): `openPostgres`, its factory behind the Engine port (app/engine.ts);
 * the pieces `ratchet migrate` runs alone; and the application pool's type.
 */
export { connect, DEFAULT_SCHEMA, MIGRATION_TIMEOUT_MS, type PoolLike, PostgresConfigError } from './database.ts';
export { openPostgres, type PostgresOptions } from './engine.ts';
export { databaseFailure, placeOf } from './failures.ts';
export { openPostgresEngine, type PostgresEngine, type PostgresEngineOptions } from './open.ts';
export { migrate, SCHEMA_VERSION, SchemaError, schemaVersionOf } from './schema.ts';
