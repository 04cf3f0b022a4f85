/**
 * The embedded engine's one SQLite connection (libsql: better-sqlite3's API
 * with prebuilt N-API binaries, so `npm ci` compiles nothing and one binary
 * serves every Node version).
 *
 * Every write goes through `write()`: BEGIN IMMEDIATE, the work, COMMIT, and
 * ROLLBACK on any error. Explicit transactions are not only for atomicity:
 * a libsql statement that fails with SQLITE_BUSY outside one leaves the
 * connection stuck on SQLITE_BUSY_SNAPSHOT, while a refused BEGIN IMMEDIATE
 * leaves nothing behind. Reads use `all()`, which steps a statement to its
 * end (libsql's `get()` adds a `_metadata` field to the row).
 */
import Database from 'libsql';
import { StoreRejectedError } from '../../lambda/store/operation-store.ts';

type Connection = InstanceType<typeof Database>;
interface Statement {
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}
export type Row = Record<string, unknown>;

/**
 * `synchronous = FULL` in WAL mode: each commit is on disk (fsync of the WAL)
 * before the webhook is answered, so an acknowledged delivery survives power
 * loss as well as `kill -9`. NORMAL would survive `kill -9` only.
 */
export const SYNCHRONOUS = 'FULL';
/**
 * How long a write waits for a lock another process holds before it gives up
 * (the webhook answers 503). The runtime is the file's only writer, so only a
 * foreign process (an operator's `sqlite3`) ever holds it; the wait blocks the
 * whole process, so it is short.
 */
export const BUSY_TIMEOUT_MS = 250;

export class Sqlite {
  private readonly statements = new Map<string, Statement>();

  constructor(
    readonly connection: Connection,
    /** The file, or `:memory:`. */
    readonly path: string,
  ) {}

  /** `plain`: none of the engine's settings (WAL, synchronous), for the lock file and read-only copies. */
  static open(path: string, options: { readonly?: boolean; plain?: boolean; timeoutMs?: number } = {}): Sqlite {
    const connection = new Database(path, { timeout: options.timeoutMs ?? BUSY_TIMEOUT_MS, readonly: options.readonly ?? false });
    const db = new Sqlite(connection, path);
    if (!options.readonly && !options.plain) {
      if (path !== ':memory:') connection.pragma('journal_mode = WAL');
      connection.pragma(`synchronous = ${SYNCHRONOUS}`);
      connection.pragma('foreign_keys = ON');
    }
    return db;
  }

  private statement(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.connection.prepare(sql) as unknown as Statement;
      this.statements.set(sql, statement);
    }
    return statement;
  }

  all<T = Row>(sql: string, ...params: unknown[]): T[] {
    return this.statement(sql).all(...params) as T[];
  }

  get<T = Row>(sql: string, ...params: unknown[]): T | undefined {
    return this.all<T>(sql, ...params)[0];
  }

  /** Inside `write()` only. */
  run(sql: string, ...params: unknown[]): { changes: number; lastInsertRowid: number | bigint } {
    return this.statement(sql).run(...params);
  }

  /** One write transaction. Errors come out classified (see `classified`). */
  write<T>(work: () => T): T {
    try {
      this.connection.exec('BEGIN IMMEDIATE');
    } catch (error) {
      throw classified(error);
    }
    try {
      const result = work();
      this.connection.exec('COMMIT');
      return result;
    } catch (error) {
      if (this.connection.inTransaction) {
        try {
          this.connection.exec('ROLLBACK');
        } catch {
          // SQLite rolled back already (some I/O errors do)
        }
      }
      throw classified(error);
    }
  }

  close(): void {
    this.statements.clear();
    this.connection.close();
  }
}

/** SQLite's answers that will not change on retry: the value itself is refused. */
const PERMANENT = /^SQLITE_(TOOBIG|MISMATCH|CONSTRAINT|RANGE)|^UNKNOWN_SQLITE_ERROR_3091$/;

/**
 * A refusal of the value becomes StoreRejectedError (a 4xx: retrying cannot
 * help); everything else (busy, locked, disk full, read-only file, I/O) passes
 * as is and means "try again" (a 503).
 */
export function classified(error: unknown): unknown {
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && PERMANENT.test(code)) {
    return new StoreRejectedError(`SQLite refused the record: ${(error as Error).message}`, { cause: error });
  }
  return error;
}
