/**
 * The PostgreSQL engine's connections across a silent partition (a proxy
 * that stops forwarding without closing anything), piece by piece: a
 * transaction cut off in the middle fails within the statement timeout, its
 * connection is never handed out again, and the server frees the locks it
 * held; closing the engine does not wait on a server that never answers; the
 * LISTEN connection notices by its ping and listens again once the network is
 * back. Short timeouts (1 s) keep it quick; the defaults are e2e's subject.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { storeAway } from '../../core/network.ts';
import { allowingLonger, connect, type Postgres, unanswered } from '../../engines/postgres/database.ts';
import { channelOf, listen } from '../../engines/postgres/listener.ts';
import { type PgProxy, startPgProxy } from '../support/pg-proxy.ts';

const url = inject('postgresUrl');
const timeouts = { statementTimeoutMs: 1_000, connectTimeoutMs: 1_000 };
const schema = `rt_partition_${Date.now().toString(36)}`;
const admin = new pg.Pool({ connectionString: url, max: 2 });
let proxy: PgProxy;
beforeAll(async () => {
  const target = new URL(url);
  proxy = await startPgProxy({ host: target.hostname, port: Number(target.port) });
  await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}; CREATE TABLE ${schema}.rows (id int PRIMARY KEY, n int NOT NULL)`);
  await admin.query(`INSERT INTO ${schema}.rows VALUES (1, 0)`);
});
afterAll(async () => {
  proxy?.heal();
  await proxy?.stop();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
});

const elapsed = async <T>(work: Promise<T>): Promise<{ ms: number; error?: unknown }> => {
  const at = Date.now();
  try {
    await work;
    return { ms: Date.now() - at };
  } catch (error) {
    return { ms: Date.now() - at, error };
  }
};

describe('a transaction cut off between two statements', () => {
  let db: Postgres;
  beforeAll(() => {
    db = connect({ url: proxy.urlFor(url), schema, maxConnections: 2, timeouts });
  });
  afterAll(async () => {
    proxy.heal();
    await db.close();
  });

  it('fails within the statement timeout as a store away, and its row lock is freed by the server within it too', async () => {
    const cut = db.transaction(async (tx) => {
      await tx.query(`UPDATE ${schema}.rows SET n = n + 1 WHERE id = 1`);
      proxy.cut();
      await tx.query('SELECT 1');
    });
    const { ms, error } = await elapsed(cut);
    expect(ms).toBeLessThan(2_000);
    expect(unanswered(error) && storeAway(error)).toBe(true);
    // Another client's write to the same row: it waits only until the server ends the cut-off transaction.
    const { ms: waited, error: refused } = await elapsed(admin.query(`UPDATE ${schema}.rows SET n = n + 10 WHERE id = 1`));
    expect(refused).toBeUndefined();
    expect(waited).toBeLessThan(2_500);
    const [row] = (await admin.query<{ n: number }>(`SELECT n FROM ${schema}.rows WHERE id = 1`)).rows;
    expect(row?.n).toBe(10);
  });

  it('its connection is not handed out again: once the network is back, the next statement works at once', async () => {
    proxy.heal();
    const { ms, error } = await elapsed(db.rows('SELECT 1 AS one'));
    expect(error).toBeUndefined();
    expect(ms).toBeLessThan(500);
    expect(await db.transaction(async (tx) => (await tx.query('SELECT 1 AS one')).rows[0])).toEqual({ one: 1 });
  });

  it('a connection not made in time, and a statement unanswered in time, are each a store away (503), within their limits', async () => {
    proxy.cut();
    const [connecting, querying] = await Promise.all([elapsed(db.rows('SELECT 1')), elapsed(db.rows('SELECT 2'))]);
    for (const { ms, error } of [connecting, querying]) {
      expect(ms).toBeLessThan(2_000);
      expect(storeAway(error), String(error)).toBe(true);
    }
    proxy.heal();
  });
});

describe('closing while cut off', () => {
  it('does not wait on a server that never answers the goodbye: its sockets are closed, none left to hold the process', async () => {
    const db = connect({ url: proxy.urlFor(url), schema, maxConnections: 2, timeouts });
    const clients: pg.PoolClient[] = [];
    db.pool.on('connect', (client) => clients.push(client));
    await Promise.all([db.rows('SELECT 1'), db.rows('SELECT 2')]);
    proxy.cut();
    try {
      const { ms, error } = await elapsed(db.close());
      expect(error).toBeUndefined();
      expect(ms).toBeLessThan(2_000);
      expect(clients.length).toBe(2);
      // Ended but waiting for the server's goodbye, a socket stays open (and the process with it) until the network returns.
      expect(clients.map((client) => client.connection.stream.destroyed)).toEqual([true, true]);
    } finally {
      proxy.heal();
    }
  });
});

describe('the LISTEN connection', () => {
  it('notices a silent network by its ping, and listens again once it is back', { timeout: 30_000 }, async () => {
    const lost: Error[] = [];
    let notices = 0;
    const listener = listen(
      proxy.urlFor(url),
      schema,
      () => notices++,
      (error) => lost.push(error),
      timeouts,
    );
    /** Whether a notice came after the `from`th within `within` ms. */
    const noticedAfter = async (from: number, within: number) => {
      for (const until = Date.now() + within; Date.now() < until; ) {
        if (notices > from) return true;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return false;
    };
    try {
      // Listening: a NOTIFY reaches it.
      await new Promise((resolve) => setTimeout(resolve, 500));
      let from = notices;
      await admin.query('SELECT pg_notify($1, $2)', [channelOf(schema), '']);
      expect(await noticedAfter(from, 2_000)).toBe(true);
      const cutAt = Date.now();
      proxy.cut();
      // A ping every 5 s, answered within 1 s or the connection is dropped.
      while (lost.length === 0 && Date.now() - cutAt < 10_000) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(lost.length).toBeGreaterThan(0);
      expect(Date.now() - cutAt).toBeLessThan(6_500);
      from = notices;
      proxy.heal();
      // Connected again (it reads once on connecting), then a NOTIFY reaches it.
      expect(await noticedAfter(from, 8_000)).toBe(true);
      from = notices;
      await admin.query('SELECT pg_notify($1, $2)', [channelOf(schema), '']);
      expect(await noticedAfter(from, 2_000)).toBe(true);
    } finally {
      proxy.heal();
      await listener.close();
    }
  });
});

describe('a chore’s statements', () => {
  let db: Postgres;
  beforeAll(() => {
    db = connect({ url, schema, maxConnections: 2, timeouts: { statementTimeoutMs: 300, connectTimeoutMs: 1_000 } });
  });
  afterAll(() => db.close());

  it('may take longer than the statement timeout inside allowingLonger (a long prune), on the pool and in a transaction', async () => {
    const slow = 'SELECT pg_sleep(0.6)';
    const { error } = await elapsed(db.rows(slow));
    expect(unanswered(error)).toBe(true);
    await expect(allowingLonger(5_000, () => db.rows(slow))).resolves.toHaveLength(1);
    await expect(allowingLonger(5_000, () => db.transaction((tx) => tx.query(slow)))).resolves.toBeDefined();
    // Outside it, the hot path's limit again.
    const { error: again } = await elapsed(db.transaction((tx) => tx.query(slow)));
    expect(unanswered(again) || storeAway(again)).toBe(true);
  });
});
