/**
 * A PostgreSQL connection ended by the server (57P01: what a restart, a
 * failover or a suspended compute sends) while Ratchet holds it in a
 * transaction, between two queries: that transaction fails, the process goes
 * on (an unheard 'error' event of a checked-out pg client would end it), and
 * the next transaction gets a working connection. And an effect whose
 * delivery could not be settled while the database was away is offered again
 * as soon as the database answers, not after its whole lease.
 */
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { Postgres } from '../../engines/postgres/database.ts';
import { connect } from '../../engines/postgres/database.ts';
import { PostgresEffectsQueue } from '../../engines/postgres/effects-queue.ts';
import { migrate } from '../../engines/postgres/schema.ts';
import { silentLogger } from '../support/silent-logger.ts';

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

/** One effect queued for `name` (SUCCEEDED, version 1 unless said), as a write would queue it. */
async function queueOne(name: string, version = 1): Promise<void> {
  await migrate(db);
  const transition = {
    name,
    kind: 'batch',
    state: 'SUCCEEDED',
    previousState: null,
    version,
    updateTime: null,
    providerState: 'x',
    result: null,
    recordedAt: '2026-12-06T10:00:00Z',
  };
  await db.run('INSERT INTO {s}.effects (name, version, transition) VALUES ($1, $2, $3)', [name, version, JSON.stringify(transition)]);
}

describe('an effect cut off by the database going away', () => {
  it('is released as soon as the database answers again, not after its lease, and then delivered once', async () => {
    await queueOne('batches/cut-off');
    // The database "away" for the first two settles after the delivery failed (fault injection on the engine's seam).
    let failures = 2;
    const flaky = new Proxy(db, {
      get(target, property, receiver) {
        if (property === 'prepared')
          return async (...args: Parameters<Postgres['prepared']>) => {
            if (args[0] === 'settle' && failures-- > 0)
              throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
            return target.prepared(...args);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const queue = new PostgresEffectsQueue(flaky, { logger: silentLogger, leaseMs: 60_000 });
    const started = Date.now();
    // The delivery's own records could not be written: it throws.
    expect(
      await queue.drain(async () => {
        throw new Error('the ledger could not be written');
      }, Date.now() + 100),
    ).toBe(1);
    const claim = await db.rows<{ claimed_until: string }>('SELECT claimed_until FROM {s}.effects WHERE name = $1', ['batches/cut-off']);
    expect(claim).toEqual([{ claimed_until: '0' }]);
    expect(failures).toBe(-1);
    expect(Date.now() - started).toBeLessThan(5_000);
    // Offered again at once: delivered, and gone.
    const delivered: string[] = [];
    await queue.drain(async (effect) => {
      delivered.push(`${effect.transition.name}#${effect.transition.version}`);
      return { kind: 'done' };
    }, Date.now() + 2_000);
    expect(delivered).toEqual(['batches/cut-off#1']);
    expect(await db.rows('SELECT name FROM {s}.effects')).toEqual([]);
    await queue.stop();
  });
});

describe('an effect’s short lease', () => {
  it('is renewed while a delivery outlasts it: a second instance never takes the effect meanwhile, and it is settled once', async () => {
    await queueOne('batches/slow-receiver');
    const first = new PostgresEffectsQueue(db, { logger: silentLogger, leaseMs: 300 });
    const second = new PostgresEffectsQueue(db, { logger: silentLogger, leaseMs: 300 });
    const deliveries: string[] = [];
    let aborted = false;
    const slow = first.drain(async (effect) => {
      deliveries.push(`first#${effect.attempt}`);
      effect.signal?.addEventListener('abort', () => {
        aborted = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 1_500)); // five leases long
      return { kind: 'done' };
    }, Date.now() + 100);
    // The second instance keeps looking while the first delivers.
    const until = Date.now() + 1_400;
    while (Date.now() < until) {
      await second.drain(async (effect) => {
        deliveries.push(`second#${effect.attempt}`);
        return { kind: 'done' };
      }, Date.now() + 50);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(await slow).toBe(1);
    expect(deliveries).toEqual(['first#1']);
    expect(aborted).toBe(false);
    expect(await db.rows('SELECT name FROM {s}.effects WHERE name = $1', ['batches/slow-receiver'])).toEqual([]);
  });

  it('stops a delivery it cannot renew before the lease ends (the database away), and another instance then takes it', async () => {
    await queueOne('batches/cut-renewal');
    // The database "away" for every renewal (fault injection on the engine's seam): claims and settles still go through.
    const away = new Proxy(db, {
      get(target, property, receiver) {
        if (property === 'rows')
          return async (...args: Parameters<Postgres['rows']>) => {
            if (args[0].includes('AND claimed_until = $3 RETURNING claimed_until'))
              throw Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
            return target.rows(...args);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const first = new PostgresEffectsQueue(away, { logger: silentLogger, leaseMs: 500 });
    let stoppedAfter = Number.NaN;
    const started = Date.now();
    const cut = first.drain(async (effect) => {
      await new Promise<void>((resolve) => {
        effect.signal?.addEventListener('abort', () => {
          stoppedAfter = Date.now() - started;
          resolve();
        });
      });
      return { kind: 'retry', inMs: 0, lastError: String(effect.signal?.reason) };
    }, Date.now() + 100);
    await cut;
    // Stopped before its lease (500 ms) ended: nobody else could have taken it yet.
    expect(stoppedAfter).toBeLessThan(500);
    expect(stoppedAfter).toBeGreaterThanOrEqual(250);
    const second = new PostgresEffectsQueue(db, { logger: silentLogger, leaseMs: 500 });
    const delivered: string[] = [];
    await eventuallyDrained(second, delivered);
    expect(delivered).toEqual(['batches/cut-renewal#2']);
  });

  it('frees an effect whose claim was cut off (claimed, then the instance gone) after the default lease: seconds, not a minute', async () => {
    await queueOne('batches/orphaned-claim');
    const gone = new PostgresEffectsQueue(db, { logger: silentLogger });
    const claimedAt = Date.now();
    expect((await gone.claim(10)).map((row) => row.name)).toEqual(['batches/orphaned-claim']);
    const other = new PostgresEffectsQueue(db, { logger: silentLogger });
    const delivered: string[] = [];
    await eventuallyDrained(other, delivered, 8_000);
    expect(delivered).toEqual(['batches/orphaned-claim#2']);
    expect(Date.now() - claimedAt).toBeLessThan(5_500);
  });
});

describe('a drain', () => {
  it('claims again when a delivery settled while its claim was on the way: the next version it freed is delivered, not left to the next tick', async () => {
    await queueOne('batches/drain-a', 1);
    await queueOne('batches/drain-a', 2);
    await queueOne('batches/drain-b', 1);
    // The drain's second claim is sent when b#1 settles, while a#1 is still delivering: its snapshot still holds a#1, so
    // a#2 is not ready in it. Its answer is held until a#1 has settled and its delivery ended: the moment the claim
    // comes back empty with nothing running (found under load in CI; made certain here on the engine's seam).
    let claims = 0;
    let releaseA = () => {};
    const aMayEnd = new Promise<void>((resolve) => {
      releaseA = resolve;
    });
    let aSettled = () => {};
    const aSettledThen = new Promise<void>((resolve) => {
      aSettled = resolve;
    });
    const held = new Proxy(db, {
      get(target, property, receiver) {
        if (property === 'prepared')
          return async (...args: Parameters<Postgres['prepared']>) => {
            const answer = await target.prepared(...args);
            if (args[0] === 'claim' && ++claims === 2) {
              releaseA();
              await aSettledThen;
              await new Promise((resolve) => setTimeout(resolve, 50));
            }
            if (args[0] === 'settle' && (args[2][0] as string[]).includes('batches/drain-a')) aSettled();
            return answer;
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const queue = new PostgresEffectsQueue(held, { logger: silentLogger });
    const delivered: string[] = [];
    const settled = await queue.drain(async (effect) => {
      const { name, version } = effect.transition;
      if (name === 'batches/drain-a' && version === 1) await aMayEnd;
      delivered.push(`${name}#${version}`);
      return { kind: 'done' };
    }, Date.now() + 5_000);
    expect(delivered).toEqual(['batches/drain-b#1', 'batches/drain-a#1', 'batches/drain-a#2']);
    expect(settled).toBe(3);
    expect(claims).toBeGreaterThanOrEqual(3);
    expect(await db.rows('SELECT name FROM {s}.effects WHERE name LIKE $1', ['batches/drain-%'])).toEqual([]);
  });
});

/** Drains `queue` every 100 ms until it delivered something (or `withinMs` passed), noting `name#attempt`. */
async function eventuallyDrained(queue: PostgresEffectsQueue, delivered: string[], withinMs = 3_000): Promise<void> {
  const until = Date.now() + withinMs;
  while (delivered.length === 0 && Date.now() < until) {
    await queue.drain(async (effect) => {
      delivered.push(`${effect.transition.name}#${effect.attempt}`);
      return { kind: 'done' };
    }, Date.now() + 100);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
