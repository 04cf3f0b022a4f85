/**
 * The SQLite engine, as front ends reach it (they import nothing else of it):
 * `openSqlite`, its factory behind the Engine port (app/engine.ts), and what
 * the one-machine commands need of the data folder itself (backup, the
 * webhook sender, the token and secret files beside the database).
 */
export { FEED_ID_NOTE } from './change-feed.ts';
export { DataFolderError, DB_FILE, DEFAULT_DATA_DIR, DEV_SECRET_FILE, IN_MEMORY, readDataFolderFile } from './data-folder.ts';
export { type ChildTracing, serveDerivedWork } from './derived-child.ts';
export { openSqlite, type SqliteOptions } from './engine.ts';
export { openSqliteEngine, type SqliteEngine, type SqliteEngineOptions } from './open.ts';
export { SchemaError, schemaVersionOf } from './schema.ts';
export { Sqlite } from './sqlite.ts';
