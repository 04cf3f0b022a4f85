/**
 * The data folder (`DATA_DIR`): one Ratchet process at a time, its SQLite
 * file, and what an older version left there.
 *
 * The lock is SQLite's own: `ratchet.lock` is a small database held in an
 * exclusive transaction for the life of the process. The operating system
 * drops that lock when the process ends, `kill -9` included, so a crash never
 * leaves a stale lock behind; `ratchet.pid` only names the holder.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { checkNotNewer, migrate } from './schema.ts';
import { Sqlite } from './sqlite.ts';

/** The data folder that is none: a database that lives as long as the process. */
export const IN_MEMORY = ':memory:';

/** `./.ratchet-data` in the folder Ratchet is started in (npm start: this checkout). */
export const DEFAULT_DATA_DIR = resolve('.ratchet-data');
export const DB_FILE = 'ratchet.db';
/** The development webhook secret, generated when WEBHOOK_SIGNING_SECRETS is unset (owner-only). */
export const DEV_SECRET_FILE = 'dev-webhook-secret';

/**
 * A file of the data folder a command-line tool points at (DATA_DIR, default
 * ./.ratchet-data), trimmed; undefined when it cannot be read. The tools find
 * the API token and the development secret this way, as the server left them.
 */
export function readDataFolderFile(env: NodeJS.ProcessEnv, name: string): string | undefined {
  try {
    return readFileSync(join(env.DATA_DIR || DEFAULT_DATA_DIR, name), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
const LOCK_FILE = 'ratchet.lock';
const HOLDER_FILE = 'ratchet.pid';
/** What the runtime before the embedded engine kept in the folder (DynamoDB Local's own SQLite file). */
export const DYNAMODB_LOCAL_FILE = 'shared-local-instance.db';

/** Why a file of the data folder cannot be opened for writing, by its error code. */
const UNWRITABLE: Readonly<Record<string, string>> = {
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'a read-only file system',
  ENOSPC: 'no space left on the device',
};

export class DataFolderError extends Error {
  override name = 'DataFolderError';
}

export interface OpenedData {
  db: Sqlite;
  /** Files (and the folder) found open to others and brought to owner-only at this start. */
  tightened: string[];
  /** The folder's files were written by the DynamoDB Local runtime: named once at start, left as they are. */
  dynamoDbLocalLeftover?: string;
  /** The schema version the file had before this start (0: a new file). */
  migratedFrom: number;
  /** Names this process as the holder (its URL once it listens). */
  announce(url: string): void;
  close(): void;
  /** Closes, and removes the folder if this start created it (a start that failed leaves nothing behind). */
  discard(): void;
}

/** Opens (and migrates) the engine's file in `dataDir`, or an in-memory one for `:memory:`. */
export function openDataFolder(dataDir: string): OpenedData {
  if (dataDir === IN_MEMORY) {
    const db = Sqlite.open(':memory:');
    const migratedFrom = migrate(db);
    return { db, migratedFrom, tightened: [], announce: () => {}, close: () => db.close(), discard: () => db.close() };
  }
  const created = !existsSync(dataDir);
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'EACCES' ? 'permission denied' : code === 'EEXIST' || code === 'ENOTDIR' ? 'a file is in the way' : code;
    throw new DataFolderError(`DATA_DIR ${dataDir} cannot be created (${why}); set DATA_DIR to a folder you can write`);
  }
  let tightened: string[];
  try {
    tightened = ownerOnly(dataDir, 0o700);
    // SQLite creates its files 0644 and gives the WAL and shared-memory files its database file's mode: created owner-only first.
    for (const name of [LOCK_FILE, DB_FILE]) writeFileSync(join(dataDir, name), '', { flag: 'a', mode: 0o600 });
  } catch (error) {
    // A read-only volume or folder: one line naming it (a raw EACCES was read as "the address is not allowed" at start).
    const { code, path } = error as NodeJS.ErrnoException;
    const why = UNWRITABLE[code ?? ''];
    if (why) throw new DataFolderError(`DATA_DIR ${dataDir} cannot be written (${why}: ${path}); set DATA_DIR to a folder you can write`);
    throw error;
  }
  const lock = holdLock(dataDir);
  try {
    const leftover = join(dataDir, DYNAMODB_LOCAL_FILE);
    const file = join(dataDir, DB_FILE);
    const probe = Sqlite.open(file, { plain: true });
    try {
      checkNotNewer(probe);
    } finally {
      probe.close();
    }
    const db = Sqlite.open(file, { checkpoints: false });
    let migratedFrom: number;
    try {
      migratedFrom = migrate(db);
    } catch (error) {
      db.close();
      throw error;
    }
    const holder = join(dataDir, HOLDER_FILE);
    const describe = (url?: string) =>
      writeFileSync(holder, `${JSON.stringify({ pid: process.pid, since: new Date().toISOString(), ...(url && { url }) })}\n`, {
        mode: 0o600,
      });
    describe();
    for (const name of OWNER_ONLY_FILES) tightened.push(...ownerOnly(join(dataDir, name), 0o600));
    return {
      db,
      migratedFrom,
      tightened,
      ...(existsSync(leftover) && { dynamoDbLocalLeftover: leftover }),
      announce: (url) => describe(url),
      close: () => {
        db.close();
        lock.close();
      },
      discard: () => {
        db.close();
        lock.close();
        if (created) rmSync(dataDir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    lock.close();
    if (created) rmSync(dataDir, { recursive: true, force: true });
    throw error;
  }
}

/** Every file of the folder that holds data, secrets or the lock: owner-only. */
const OWNER_ONLY_FILES = [DB_FILE, `${DB_FILE}-wal`, `${DB_FILE}-shm`, LOCK_FILE, HOLDER_FILE, DEV_SECRET_FILE, 'api-token'];

/** Brings `path` to `mode` if it is open to anyone else; `[path]` when it had to. */
function ownerOnly(path: string, mode: number): string[] {
  if (!existsSync(path)) return [];
  const was = statSync(path).mode & 0o777;
  if ((was & 0o077) === 0) return [];
  chmodSync(path, mode);
  return [`${path} (was ${was.toString(8)})`];
}

function holdLock(dataDir: string): Sqlite {
  const lock = Sqlite.open(join(dataDir, LOCK_FILE), { plain: true, timeoutMs: 0 });
  try {
    lock.connection.exec('PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE');
    return lock;
  } catch (error) {
    lock.close();
    if ((error as { code?: string }).code?.startsWith('SQLITE_BUSY'))
      throw new DataFolderError(`${dataDir} is in use by ${holderOf(dataDir)}; stop it, or set DATA_DIR to another folder`);
    throw error;
  }
}

function holderOf(dataDir: string): string {
  try {
    const { pid, url, since } = JSON.parse(readFileSync(join(dataDir, HOLDER_FILE), 'utf8')) as {
      pid: number;
      url?: string;
      since: string;
    };
    return `another Ratchet (pid ${pid}${url ? `, ${url}` : ''}, since ${since})`;
  } catch {
    return 'another process';
  }
}
