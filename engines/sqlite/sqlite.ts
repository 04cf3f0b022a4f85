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
import { createRequire } from 'node:module';
import type Database from 'libsql';
import { StoreRejectedError } from '../../app/ports.ts';

type Connection = InstanceType<typeof Database>;
interface Statement {
  all(...params: unknown[]): unknown[];
  run(...params: unknown[]): { changes: number; lastInsertRowid: number | bigint };
}
export type Row = Record<string, unknown>;

/**
 * Durable writes (what a sender is told "OK" about: the operations and their
 * outbox) commit with `synchronous = FULL`: the WAL is on disk before the
 * answer, so they survive power loss as well as `kill -9`. Everything derived
 * from the outbox (history, the effects queue, the ledger, dead letters)
 * commits with NORMAL: it survives `kill -9`; a power loss can take its last
 * commits, which the outbox and the idempotent consumers redo (WAL frames are
 * kept in order, so a lost derived commit never outlives a later durable one's
 * sync). One fsync per acknowledged delivery, none for the rest.
 */
export type Durability = 'durable' | 'derived';
const SYNCHRONOUS: Record<Durability, string> = { durable: 'FULL', derived: 'NORMAL' };
/**
 * How long a write waits for a lock another process holds before it gives up
 * (the webhook answers 503). The runtime and its derived-work process take
 * turns with short transactions; beyond them only a foreign process (an
 * operator's `sqlite3`) ever holds it. The wait blocks the whole process, so
 * it is short.
 */
export const BUSY_TIMEOUT_MS = 250;

/** A synchronous pause of a fraction of a millisecond (Atomics.wait on a value that never changes). */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
const BUSY_RETRY_MS = 0.2;

/**
 * `attempt`, again every 0.2 ms while SQLite answers SQLITE_BUSY, for at most
 * `timeoutMs`. The runtime and its derived-work process pass the write lock
 * back and forth, each holding it about a millisecond at a time: retried this
 * way a writer gets it within a fraction of one, where SQLite's own busy
 * handler sleeps 1, 2, 5, 10, 15, 20, 25 ms… and leaves the waiter behind a
 * busy peer for tens of milliseconds (which showed as effect lag).
 */
function whileBusy<T>(timeoutMs: number, attempt: () => T): T {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    try {
      return attempt();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code !== 'string' || !code.startsWith('SQLITE_BUSY') || performance.now() >= deadline) throw error;
      Atomics.wait(PAUSE, 0, 0, BUSY_RETRY_MS);
    }
  }
}

export class Sqlite {
  private readonly statements = new Map<string, Statement>();
  /** How long a write or read waits out another connection's lock (whileBusy); 0 for plain and read-only connections. */
  private busyTimeoutMs = 0;
  private synchronous?: Durability;
  private group: Array<{
    work: () => unknown;
    durability: Durability;
    settle: (outcome: { value: unknown } | { error: unknown }) => void;
  }> = [];

  constructor(
    readonly connection: Connection,
    /** The file, or `:memory:`. */
    readonly path: string,
  ) {}

  /**
   * `plain`: none of the engine's settings (WAL, synchronous), for the lock
   * file and read-only copies. `checkpoints: false`: this connection's commits
   * never checkpoint the WAL (the runtime's, whose commits a webhook waits on;
   * its derived-work process checkpoints instead).
   */
  static open(path: string, options: { readonly?: boolean; plain?: boolean; timeoutMs?: number; checkpoints?: boolean } = {}): Sqlite {
    const engine = !options.readonly && !options.plain;
    // The engine's connections wait for locks in whileBusy, not in SQLite's busy handler.
    const timeout = engine ? 0 : (options.timeoutMs ?? BUSY_TIMEOUT_MS);
    const connection = new (libsql())(path, { timeout, readonly: options.readonly ?? false });
    const db = new Sqlite(connection, path);
    if (engine) {
      db.busyTimeoutMs = options.timeoutMs ?? BUSY_TIMEOUT_MS;
      if (path !== ':memory:') whileBusy(db.busyTimeoutMs, () => connection.pragma('journal_mode = WAL'));
      if (options.checkpoints === false) connection.pragma('wal_autocheckpoint = 0');
      connection.pragma('foreign_keys = ON');
      db.syncFor('durable');
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
    const statement = this.statement(sql);
    return whileBusy(this.busyTimeoutMs, () => statement.all(...params) as T[]);
  }

  get<T = Row>(sql: string, ...params: unknown[]): T | undefined {
    return this.all<T>(sql, ...params)[0];
  }

  /** Inside `write()` only. */
  run(sql: string, ...params: unknown[]): { changes: number; lastInsertRowid: number | bigint } {
    return this.statement(sql).run(...params);
  }

  private syncFor(durability: Durability): void {
    if (this.synchronous === durability) return;
    this.connection.exec(`PRAGMA synchronous = ${SYNCHRONOUS[durability]}`);
    this.synchronous = durability;
  }

  /** One write transaction, durable unless said otherwise. Errors come out classified (see `classified`). */
  write<T>(work: () => T, durability: Durability = 'durable'): T {
    try {
      this.syncFor(durability);
      whileBusy(this.busyTimeoutMs, () => this.connection.exec('BEGIN IMMEDIATE'));
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

  /**
   * A write committed together with the others asked for in the same turn of
   * the event loop (group commit): one transaction, and at most one fsync, for
   * the group; durable if any of its writes is. Each write runs in a savepoint
   * of its own, so one that fails (a value SQLite refuses) leaves the others
   * whole; a failed commit fails them all.
   */
  writeGrouped<T>(work: () => T, durability: Durability = 'durable'): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.group.length === 0) setImmediate(() => this.commitGroup());
      this.group.push({
        work,
        durability,
        settle: (outcome) => ('error' in outcome ? reject(outcome.error) : resolve(outcome.value as T)),
      });
    });
  }

  private commitGroup(): void {
    const group = this.group.splice(0);
    const outcomes: Array<{ value: unknown } | { error: unknown }> = [];
    const durability = group.some((one) => one.durability === 'durable') ? 'durable' : 'derived';
    try {
      this.write(() => {
        for (const { work } of group) {
          this.connection.exec('SAVEPOINT one');
          try {
            outcomes.push({ value: work() });
            this.connection.exec('RELEASE one');
          } catch (error) {
            this.connection.exec('ROLLBACK TO one; RELEASE one');
            outcomes.push({ error: classified(error) });
          }
        }
      }, durability);
    } catch (error) {
      for (const { settle } of group) settle({ error });
      return;
    }
    for (const [i, { settle }] of group.entries()) settle(outcomes[i] as { value: unknown } | { error: unknown });
  }

  /**
   * Reads that must see one state of the file together (another connection
   * may commit between two statements otherwise): one read transaction.
   * Never called inside a write; synchronous, so nothing of this connection
   * interleaves.
   */
  read<T>(work: () => T): T {
    this.connection.exec('BEGIN DEFERRED');
    try {
      return work();
    } finally {
      this.connection.exec('COMMIT');
    }
  }

  /** A write of what the outbox can rebuild (see Durability). */
  writeDerived<T>(work: () => T): T {
    return this.write(work, 'derived');
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

/**
 * libsql's native module, loaded when a file is first opened: an application
 * that runs Ratchet on PostgreSQL (the library) never loads it.
 */
let loaded: typeof Database | undefined;
function libsql(): typeof Database {
  loaded ??= createRequire(import.meta.url)('libsql') as typeof Database;
  return loaded;
}
