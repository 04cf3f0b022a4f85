/**
 * A PostgreSQL connection ended by the server (57P01: what a restart, a
 * failover or a suspended compute sends) while Ratchet holds it in a
 * transaction, between two queries: that transaction fails, the process goes
 * on (an unheard 'error' event of a checked-out pg client would end it), and
 * the next transaction gets a working connection.
 */
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { connect } from '../../engines/postgres/database.ts';

const url = inject('postgresUrl');
const admin = new pg.Pool({ connectionString: url, max: 1 });
const db = connect({ url, schema: `rt_faults_${Date.now().toString(36)}`, maxConnections: 2 });
afterAll(async () => {
  await db.close();
  await admin.end();
});

describe('a connection the server ends mid-transaction', () => {
  it('fails that transaction alone: no uncaught error, and the next one works', async () => {
    const unexpected: unknown[] = [];
    const heard = (error: unknown) => unexpected.push(error);
    process.on('uncaughtException', heard);
    try {
      const transaction = db.transaction(async (tx) => {
        const [row] = (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows;
        await admin.query('SELECT pg_terminate_backend($1)', [row?.pid]);
        // The server's goodbye arrives while no query runs on this connection.
        await new Promise((resolve) => setTimeout(resolve, 300));
        await tx.query('SELECT 1');
      });
      await expect(transaction).rejects.toThrow();
      for (let i = 0; i < 3; i++)
        expect(await db.transaction(async (tx) => (await tx.query('SELECT 1 AS one')).rows[0])).toEqual({ one: 1 });
    } finally {
      process.off('uncaughtException', heard);
    }
    expect(unexpected).toEqual([]);
  });
});
