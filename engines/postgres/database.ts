/**
 * The PostgreSQL engine's connection: a `pg` pool (Ratchet's own, from
 * DATABASE_URL, or the application's), every table qualified by the schema
 * (DATABASE_SCHEMA, default `ratchet`), and transactions. Nothing on the hot
 * path leaves state on a connection (no SET, no session advisory lock, no named
 * prepared statement), so it works through PgBouncer or Supavisor in
 * transaction mode.
 *
 * Every transaction of Ratchet's names itself in `pg_stat_activity`
 * (`application_name`, set for the transaction alone, in BEGIN's round trip):
 * FEED_WRITER where it may write to the change log, EFFECTS_WORKER where it
 * runs an application's `onChange`. The change feed's horizon waits only for
 * the first (change-log.ts); another session's transaction, or a slow
 * handler's, holds nothing.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import pg from 'pg';
import { PG_UNANSWERED } from '../../core/network.ts';

/** A schema name Ratchet accepts: a plain lower-case identifier, quoted where it is used. */
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** The `application_name` of Ratchet's transactions that may write to the change log (and of the connections it opens). */
export const FEED_WRITER = 'ratchet';
/** The `application_name` of a transaction that runs an application's `onChange` (app-sink.ts). */
export const EFFECTS_WORKER = 'ratchet effects';

export class PostgresConfigError extends Error {
  override name = 'PostgresConfigError';
}

/** Something that runs a query: the pool, or a transaction's client. */
export interface Queryable {
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/** A named statement the server connection does not have (26000), or has already (42P05): a pooler between. */
const PREPARE_REFUSED = new Set(['26000', '42P05']);

/** SQLSTATEs a transaction is retried on: serialization failure, deadlock, unique violation of a racing insert. */
export const RETRIED_STATES = new Set(['40001', '40P01']);

/** How long Ratchet waits on the database (DATABASE_STATEMENT_TIMEOUT_MS, DATABASE_CONNECT_TIMEOUT_MS). */
export interface Timeouts {
  /** A statement unanswered this long fails and its connection is dropped (default 5 s). */
  statementTimeoutMs: number;
  /** A connection not made, or not free in the pool, this long fails (default 5 s). */
  connectTimeoutMs: number;
}

export const DEFAULT_TIMEOUTS: Timeouts = { statementTimeoutMs: 5_000, connectTimeoutMs: 5_000 };

/** An idle connection is probed this long after its last traffic (Node then probes every second, ten times). */
const KEEPALIVE_IDLE_MS = 5_000;

/** How long a migration's statements may take: DDL on a large table, or waiting for another instance's migration. */
export const MIGRATION_TIMEOUT_MS = 15 * 60_000;

/** How long an hourly chore's statements may take: the first prune after a long pause can delete millions of rows. */
export const CHORE_TIMEOUT_MS = 5 * 60_000;

/** A longer statement limit for the work run inside `allowingLonger` (the chores), whichever object sends its statements. */
const longer = new AsyncLocalStorage<number>();

/** `fn` with each of its statements allowed `ms` instead of the statement timeout (the hourly chores). */
export function allowingLonger<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  return longer.run(ms, fn);
}

/** What every connection of Ratchet's own is made with (the pool's and LISTEN's): keepalive, and its two limits. */
export function connectionLimits(timeouts: Timeouts): pg.ClientConfig {
  return {
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    connectionTimeoutMillis: timeouts.connectTimeoutMs,
    query_timeout: timeouts.statementTimeoutMs,
  };
}

/** pg's words for a statement or a connection that got no answer in time (query_timeout, connectionTimeoutMillis), here or in a cause. */
export function unanswered(error: unknown): boolean {
  for (let at = error, depth = 0; at instanceof Error && depth < 5; at = at.cause, depth++) if (PG_UNANSWERED.test(at.message)) return true;
  return false;
}

/**
 * Ends `client` without waiting on a server that may never answer: its
 * goodbye is sent, and its socket closed after `graceMs` whatever came back.
 */
export async function hangUp(client: pg.Client, graceMs = 0): Promise<void> {
  const ended = client.end().catch(() => undefined);
  if (graceMs > 0) await atMost(graceMs, ended);
  client.connection.stream.destroy();
}

/**
 * `work`, waited for `ms` at most. The timer keeps the process alive while it
 * runs (an unreferenced one would let a script awaiting its close exit early,
 * with 13, unsettled) and is cleared as soon as `work` ends.
 */
async function atMost(ms: number, work: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

export class Postgres {
  private readonly quoted: string;
  /** The pool's connections not yet ended: at close, those whose server never says goodbye are closed unasked. */
  private readonly open = new Set<pg.Client>();

  constructor(
    readonly pool: pg.Pool,
    readonly schema: string,
    /** Whether this engine created the pool (and so ends it on close). */
    private readonly ownsPool: boolean,
    readonly timeouts: Timeouts = DEFAULT_TIMEOUTS,
  ) {
    if (!SCHEMA_NAME.test(schema) || schema.startsWith('pg_'))
      throw new PostgresConfigError(
        `DATABASE_SCHEMA must be a lower-case identifier (letters, digits, _) not starting with pg_, not ${JSON.stringify(schema)}`,
      );
    this.quoted = `"${schema}"`;
    if (ownsPool) {
      pool.on('connect', (client) => this.open.add(client));
      pool.on('remove', (client) => this.open.delete(client));
    }
  }

  /** `text` with each `{s}` replaced by the quoted schema: `SELECT … FROM {s}.operations`. */
  sql(text: string): string {
    return text.replaceAll('{s}', this.quoted);
  }

  async rows<R extends pg.QueryResultRow>(text: string, values: unknown[] = [], on: Queryable = this.pool): Promise<R[]> {
    return (await this.send<R>(on, this.sql(text), values)).rows;
  }

  async run(text: string, values: unknown[] = [], on: Queryable = this.pool): Promise<number> {
    return (await this.send(on, this.sql(text), values)).rowCount ?? 0;
  }

  /** The statement limit in force: a chore's (allowingLonger), else this connection's. */
  private statementLimit(): number {
    return longer.getStore() ?? this.timeouts.statementTimeoutMs;
  }

  /** A statement on the pool carries its own limit (pg reads query_timeout per statement; its types do not name it). */
  private send<R extends pg.QueryResultRow>(on: Queryable, text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    if (on !== this.pool) return on.query<R>(text, values);
    return this.pool.query<R>({ text, values, query_timeout: this.statementLimit() } as pg.QueryConfig);
  }

  /** Whether the hot statements go as named prepared statements (until a pooler shows it cannot keep them). */
  private prepares = true;

  /**
   * One of the hot path's statements (a webhook's write, the effects' claim
   * and settle), prepared once per connection and named for this schema, so
   * the server plans it once, not on every call. A pooler that hands each
   * statement to any server connection (PgBouncer before 1.21 in transaction
   * mode) answers that the statement does not exist or exists already: the
   * statement is sent again unnamed, and so is every later one. Either answer
   * comes before the statement ran.
   */
  async prepared<R extends pg.QueryResultRow>(name: string, text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    if (this.prepares)
      try {
        return await this.pool.query<R>({
          name: `ratchet_${this.schema}_${name}`,
          text: this.sql(text),
          values,
          query_timeout: this.statementLimit(),
        } as pg.QueryConfig);
      } catch (error) {
        if (!PREPARE_REFUSED.has(sqlStateOf(error) ?? '')) throw error;
        this.prepares = false;
      }
    return this.send<R>(this.pool, this.sql(text), values);
  }

  /**
   * `fn` in one transaction on one connection (READ COMMITTED): committed when it returns, rolled back when it throws.
   * `as` names it (FEED_WRITER unless it runs an application's handler). Its statements, and the time between them,
   * are bounded by the statement timeout on both sides.
   */
  async transaction<T>(fn: (tx: Queryable) => Promise<T>, as: typeof FEED_WRITER | typeof EFFECTS_WORKER = FEED_WRITER): Promise<T> {
    const client = await this.pool.connect();
    let broken: Error | undefined;
    // A checked-out connection the server ends between two queries (57P01 on a restart or a failover) emits
    // 'error', which the pool listens for only while the connection is idle: unheard, it would end the process.
    // Heard here, the transaction's next query fails instead, and the connection is not handed out again.
    const lost = (error: Error) => {
      broken = error;
    };
    client.on('error', lost);
    const limit = this.statementLimit();
    // Each statement with this Postgres's own limit (a migration's is longer than the pool's).
    const tx: Queryable = {
      query: <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => {
        // pg reads query_timeout per statement; its type declarations do not name it.
        const statement = { text, values, query_timeout: limit };
        return client.query<R>(statement);
      },
    };
    try {
      // One round trip (a simple query of two statements): the name and the server's limits are set before the
      // transaction writes anything; a connection cut off mid-transaction then holds its locks no longer than the limit.
      await tx.query(
        `BEGIN; SELECT set_config('application_name', '${as}', true), set_config('statement_timeout', '${limit}', true), ` +
          `set_config('idle_in_transaction_session_timeout', '${limit}', true)`,
      );
      const result = await fn(tx);
      await tx.query('COMMIT');
      return result;
    } catch (error) {
      // A connection that did not answer in time would not answer a ROLLBACK either: it is dropped unasked.
      if (broken || unanswered(error)) broken ??= error as Error;
      else
        await tx.query('ROLLBACK').catch((rollback: Error) => {
          broken = rollback;
        });
      throw error;
    } finally {
      // A connection whose rollback failed, that timed out, or that was lost, is not handed out again (the pool
      // destroys it: a statement still waiting for its answer is not waited for).
      client.off('error', lost);
      client.release(broken);
    }
  }

  /** This connection with a longer statement timeout, for a migration: DDL on a large table, or another instance's migration waited for. */
  withStatementTimeout(statementTimeoutMs: number): Postgres {
    return new Postgres(this.pool, this.schema, false, { ...this.timeouts, statementTimeoutMs });
  }

  async close(): Promise<void> {
    if (!this.ownsPool) return;
    await this.pool.end();
    // A connection whose server went silent never answers the goodbye: after a moment, its socket is closed unasked.
    const lingering = [...this.open].filter((client) => !client.connection.stream.destroyed);
    if (lingering.length === 0) return;
    await atMost(1_000, Promise.all(lingering.map((client) => new Promise((closed) => client.connection.stream.once('close', closed)))));
    for (const client of lingering) client.connection.stream.destroy();
  }
}

/**
 * The application's `pg` Pool, as far as Ratchet's public types name it: no
 * dependency on `pg`'s type declarations for an application that passes one.
 */
export interface PoolLike {
  connect(): Promise<unknown>;
  query(text: string, values?: unknown[]): Promise<unknown>;
  on(event: 'error', listener: (error: Error) => void): unknown;
}

export interface PostgresOptions {
  /** `postgres://user:password@host:port/database?sslmode=…` (DATABASE_URL). */
  url?: string;
  /** The application's own pool, instead of a URL (Ratchet inside an app). */
  pool?: PoolLike;
  /** Where the tables live (DATABASE_SCHEMA, default `ratchet`). */
  schema?: string;
  /** The pool's size when Ratchet makes it (default 10). */
  maxConnections?: number;
  /** How long a statement and a connection may take (default 5 s each); the application's pool sets its own client side. */
  timeouts?: Timeouts;
}

export const DEFAULT_SCHEMA = 'ratchet';

/** The engine's connection, from a URL (TLS as its `sslmode` says) or the application's pool. */
export function connect(options: PostgresOptions): Postgres {
  const schema = options.schema ?? DEFAULT_SCHEMA;
  const timeouts = options.timeouts ?? DEFAULT_TIMEOUTS;
  if (options.pool) return new Postgres(options.pool as unknown as pg.Pool, schema, false, timeouts);
  if (!options.url) throw new PostgresConfigError('DATABASE_URL is not set');
  let url: URL;
  try {
    url = new URL(options.url);
  } catch {
    throw new PostgresConfigError('DATABASE_URL is not a URL (expected postgres://user:password@host:port/database)');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:')
    throw new PostgresConfigError(`DATABASE_URL must be a postgres:// URL, not ${url.protocol}//…`);
  // Idle connections do not hold a process open whose work is done (a serverless function, a script).
  const pool = new pg.Pool({
    connectionString: verifiedFull(url),
    max: options.maxConnections ?? 10,
    allowExitOnIdle: true,
    application_name: FEED_WRITER,
    ...connectionLimits(timeouts),
  });
  // An idle connection the server (or a pooler) dropped is an error on the pool: logged by the caller's queries, not fatal.
  pool.on('error', () => {});
  return new Postgres(pool, schema, true, timeouts);
}

/**
 * node-pg verifies `sslmode=prefer`, `require` and `verify-ca` as `verify-full`
 * (the certificate and the host name), and says so in a six-line warning on
 * the terminal at every start: the URL is handed over with the mode it means.
 * `uselibpqcompat=true` (libpq's weaker meanings) is left as it is.
 */
export function verifiedFull(url: URL): string {
  const mode = url.searchParams.get('sslmode');
  if (url.searchParams.get('uselibpqcompat') === 'true' || !mode || !['prefer', 'require', 'verify-ca'].includes(mode)) return url.href;
  const copy = new URL(url.href);
  copy.searchParams.set('sslmode', 'verify-full');
  return copy.href;
}

/** A SQLSTATE of a pg error, if it has one. */
export function sqlStateOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}
