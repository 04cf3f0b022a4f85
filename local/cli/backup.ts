/**
 * `npm run backup -- <file>`: a consistent copy of the embedded engine's data
 * (`DATA_DIR/ratchet.db`), taken while Ratchet runs or not. SQLite's
 * `VACUUM INTO` copies one read snapshot: every transaction is in the copy
 * whole or not at all, and the runtime goes on writing meanwhile (WAL).
 *
 * To restore: stop Ratchet, put the copy in place of `DATA_DIR/ratchet.db`
 * (removing `ratchet.db-wal` and `ratchet.db-shm` beside it), start it.
 *
 * The copy leaves out the change feed's id, so a runtime started on it makes
 * a new one: every cursor a reader kept from before the restore is then
 * refused (410) rather than read on from a position the restored file
 * reached by other writes (engines/sqlite/change-feed.ts).
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { DB_FILE, DEFAULT_DATA_DIR, FEED_ID_NOTE, Sqlite, schemaVersionOf } from '../../engines/sqlite/index.ts';

const command = {
  name: 'ratchet backup',
  usage: `usage: [DATA_DIR=…] ratchet backup <file>
  Copies DATA_DIR/ratchet.db (default ${DEFAULT_DATA_DIR}) to <file>, consistently, while Ratchet runs.
  Restore: stop Ratchet, replace DATA_DIR/ratchet.db with the copy (delete ratchet.db-wal and ratchet.db-shm), start it.`,
  options: {},
  positionals: { min: 1, max: 1 },
} as const;

const { positionals } = parseCommandLine(command);
const target = resolve(positionals[0] as string);
const dataDir = process.env.DATA_DIR || DEFAULT_DATA_DIR;
if (dataDir === ':memory:') usageError(command, 'DATA_DIR is :memory:, which keeps nothing to back up');
const source = join(dataDir, DB_FILE);
if (!existsSync(source)) failure(command, `no Ratchet data at ${source} (is DATA_DIR right?)`);
if (existsSync(target)) failure(command, `${target} exists; name a new file`);

try {
  const db = Sqlite.open(source, { readonly: true });
  try {
    db.connection.prepare('VACUUM INTO ?').run(target);
  } finally {
    db.close();
  }
  const written = Sqlite.open(target, { plain: true });
  try {
    written.write(() => written.run('DELETE FROM notes WHERE key = ?', FEED_ID_NOTE));
  } finally {
    written.close();
  }
  const copy = Sqlite.open(target, { readonly: true });
  try {
    const operations = copy.get<{ n: number }>('SELECT count(*) AS n FROM operations')?.n ?? 0;
    console.log(`backup: ${source} copied to ${target} (${operations} operation(s), schema version ${schemaVersionOf(copy)})`);
  } finally {
    copy.close();
  }
} catch (error) {
  failure(command, (error as Error).message);
}
