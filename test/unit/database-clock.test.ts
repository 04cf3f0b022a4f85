/**
 * The database's clock as an instance carries it (engines/postgres/clock.ts):
 * read by a round trip, carried forward by the monotonic timer, and read
 * again once older than half a minute, whether a timer runs or not (an app
 * that only ticks). The database here is a stand-in that answers its time.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DatabaseClock } from '../../engines/postgres/clock.ts';
import type { Postgres } from '../../engines/postgres/database.ts';

/** A database whose clock reads `offsetMs` off this process's, counting the readings. */
const databaseAt = (offsetMs: { value: number }) => {
  const readings: number[] = [];
  const db = {
    rows: async () => {
      readings.push(Date.now());
      return [{ ms: String(Date.now() + offsetMs.value) }];
    },
  } as unknown as Postgres;
  return { db, readings };
};

afterEach(() => {
  vi.useRealTimers();
});

describe('DatabaseClock', () => {
  it('reads the database’s time, not this process’s, and carries it forward', async () => {
    const offset = { value: 30_000 };
    const { db } = databaseAt(offset);
    const clock = new DatabaseClock(db);
    expect(Math.abs(clock.nowMs() - Date.now())).toBeLessThan(50); // before the first reading: its own
    await clock.sync();
    expect(Math.abs(clock.nowMs() - (Date.now() + 30_000))).toBeLessThan(50);
    expect(Math.abs(clock.now().getTime() - (Date.now() + 30_000))).toBeLessThan(50);
  });

  it('reads it again when used past the resync period, without a timer (an app that only ticks)', async () => {
    vi.useFakeTimers({ toFake: ['performance', 'Date'] });
    const offset = { value: -30_000 };
    const { db, readings } = databaseAt(offset);
    const clock = new DatabaseClock(db);
    await clock.sync();
    expect(readings).toHaveLength(1);
    vi.advanceTimersByTime(10_000);
    clock.nowMs();
    expect(readings).toHaveLength(1);
    // The database's clock jumps (a failover to a server whose clock differs); the next reading takes it.
    offset.value = -20_000;
    vi.advanceTimersByTime(25_000);
    const stale = clock.nowMs();
    expect(Math.abs(stale - (Date.now() - 30_000))).toBeLessThan(50);
    await vi.waitFor(() => expect(readings).toHaveLength(2));
    expect(Math.abs(clock.nowMs() - (Date.now() - 20_000))).toBeLessThan(50);
  });
});
