/**
 * The PostgreSQL engine's pool setting (DATABASE_POOL_MAX, and DATABASE_POOL_SIZE, its former name), which errors mean a store
 * away for now, and its prepared statements' fallback behind a pooler (fault injection: the real pooler is in postgres.test).
 */
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { storeAway } from '../../core/network.ts';
import { Postgres } from '../../engines/postgres/database.ts';

describe('DATABASE_POOL_MAX', () => {
  it('is 10 unless set; its former name DATABASE_POOL_SIZE is still read', () => {
    expect(loadConfig({}).DATABASE_POOL_MAX).toBe(10);
    expect(loadConfig({ DATABASE_POOL_MAX: '25' }).DATABASE_POOL_MAX).toBe(25);
    expect(loadConfig({ DATABASE_POOL_SIZE: '4' }).DATABASE_POOL_MAX).toBe(4);
    expect(loadConfig({ DATABASE_POOL_MAX: '4', DATABASE_POOL_SIZE: '4' }).DATABASE_POOL_MAX).toBe(4);
  });

  it('refuses a size out of range, and the two names disagreeing, in one line each', () => {
    expect(() => loadConfig({ DATABASE_POOL_MAX: '0' })).toThrow('DATABASE_POOL_MAX must be a whole number from 1 to 1000, not "0"');
    expect(() => loadConfig({ DATABASE_POOL_MAX: '8', DATABASE_POOL_SIZE: '4' })).toThrow(
      'DATABASE_POOL_MAX and DATABASE_POOL_SIZE (its former name) disagree: keep DATABASE_POOL_MAX',
    );
  });
});

describe('DATABASE_STATEMENT_TIMEOUT_MS and DATABASE_CONNECT_TIMEOUT_MS', () => {
  it('are 5 s each unless set: a dead peer is noticed within 10 s', () => {
    const config = loadConfig({});
    expect([config.DATABASE_STATEMENT_TIMEOUT_MS, config.DATABASE_CONNECT_TIMEOUT_MS]).toEqual([5_000, 5_000]);
    expect(loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '30000' }).DATABASE_STATEMENT_TIMEOUT_MS).toBe(30_000);
  });

  it('refuse a value that is no whole number of milliseconds in range, in one line each', () => {
    expect(() => loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '5s' })).toThrow(
      'DATABASE_STATEMENT_TIMEOUT_MS must be a whole number of milliseconds from 100 to 3600000, not "5s"',
    );
    expect(() => loadConfig({ DATABASE_STATEMENT_TIMEOUT_MS: '0' })).toThrow('from 100 to 3600000, not "0"');
    expect(() => loadConfig({ DATABASE_CONNECT_TIMEOUT_MS: '2.5' })).toThrow(
      'DATABASE_CONNECT_TIMEOUT_MS must be a whole number of milliseconds from 100 to 600000, not "2.5"',
    );
  });
});

describe('storeAway: what a store away for now looks like (answered 503, never 500)', () => {
  const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
  it.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['a restart (57P01)', pgError('57P01', 'terminating connection due to administrator command')],
    ['a server starting up (57P03)', pgError('57P03', 'the database system is starting up')],
    ['too many clients (53300)', pgError('53300', 'too many connections for role "x"')],
    ['a broken connection (08006)', pgError('08006', 'connection failure')],
    ['a cut connection', new Error('Connection terminated unexpectedly')],
    ['a pool that could not connect in time', new Error('timeout exceeded when trying to connect')],
    ['a connection not made in time (a silent network)', new Error('Connection terminated due to connection timeout')],
    ['a statement unanswered in time (a silent network)', new Error('Query read timeout')],
    ['a statement the server ended at its statement_timeout (57014)', pgError('57014', 'canceling statement due to statement timeout')],
  ])('%s', (_, error) => {
    expect(storeAway(error)).toBe(true);
  });

  it.each([
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'x')")],
    ['a constraint (23505)', pgError('23505', 'duplicate key value violates unique constraint')],
    ['a missing privilege (42501)', pgError('42501', 'permission denied for table operations')],
  ])('not %s', (_, error) => {
    expect(storeAway(error)).toBe(false);
  });
});

describe('prepared statements behind a pooler that cannot keep them', () => {
  /** A pool whose server connections do not keep named statements (PgBouncer before 1.21, transaction mode). */
  const pooler = (refusal: string) => {
    const sent: Array<{ named: boolean }> = [];
    const pool = {
      query: async (query: string | { name?: string }) => {
        const named = typeof query === 'object' && query.name !== undefined;
        sent.push({ named });
        if (named) throw Object.assign(new Error(`prepared statement refused`), { code: refusal });
        return { rows: [{ ok: true }], rowCount: 1 };
      },
    };
    return { db: new Postgres(pool as unknown as pg.Pool, 'ratchet', false), sent };
  };

  it.each([
    ['does not exist (26000)', '26000'],
    ['exists already (42P05)', '42P05'],
  ])('a statement the server answers %s is sent again unnamed, and so is every later one', async (_, code) => {
    const { db, sent } = pooler(code);
    expect((await db.prepared('write', 'SELECT 1', [])).rows).toEqual([{ ok: true }]);
    expect((await db.prepared('write', 'SELECT 1', [])).rows).toEqual([{ ok: true }]);
    expect(sent).toEqual([{ named: true }, { named: false }, { named: false }]);
  });

  it('any other error is the caller’s, and naming goes on', async () => {
    const { db } = pooler('57P01');
    await expect(db.prepared('write', 'SELECT 1', [])).rejects.toThrow('prepared statement refused');
    await expect(db.prepared('write', 'SELECT 1', [])).rejects.toThrow('prepared statement refused');
  });
});
