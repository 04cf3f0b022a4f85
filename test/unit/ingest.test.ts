import { describe, expect, it } from 'vitest';
import type { OperationEvent } from '../../lambda/core/reducer.ts';
import { ingest, NotRecordedError } from '../../lambda/ingest.ts';
import { MemoryStore } from '../support/memory-store.ts';

const clock = () => new Date('2026-12-01T00:00:00Z');
const noSleep = async () => {};
const running: OperationEvent = {
  name: 'batches/1',
  kind: 'batch',
  state: 'RUNNING',
  providerState: 'JOB_STATE_RUNNING',
  updateTime: '2026-11-30T10:00:00.000000000Z',
  source: 'poll',
};
const succeeded: OperationEvent = { ...running, state: 'SUCCEEDED', providerState: 'batch.succeeded', source: 'webhook', eventId: 'msg_1' };

describe('ingest', () => {
  it('applies a forward event and discards a stale one without writing', async () => {
    const store = new MemoryStore();
    expect(await ingest(succeeded, { store, clock })).toMatchObject({
      outcome: 'applied',
      stateChanged: true,
      attempts: 1,
      record: { state: 'SUCCEEDED', version: 1 },
    });
    expect(await ingest(running, { store, clock })).toMatchObject({
      outcome: 'discarded',
      reason: 'regress-from-terminal',
      record: { state: 'SUCCEEDED' },
    });
    expect(store.writes).toBe(1);
  });

  it('on a lost race, reduces again against the winner the store returned', async () => {
    const store = new MemoryStore();
    // The seed's race: a poll that read "no record yet" loses to the SUCCEEDED webhook.
    const winner = new MemoryStore();
    await ingest(succeeded, { store: winner, clock });
    store.beforeWrite = () => {
      store.beforeWrite = undefined;
      store.records = new Map(winner.records);
    };
    const result = await ingest(running, { store, clock, sleep: noSleep });
    expect(result).toMatchObject({ outcome: 'discarded', reason: 'regress-from-terminal', attempts: 2 });
    expect(store.records.get('batches/1')?.state).toBe('SUCCEEDED');
  });

  it('reports not-recorded (never success) when every attempt loses', async () => {
    const store = new MemoryStore();
    let version = 0;
    store.beforeWrite = (next) => {
      // Another writer keeps refreshing the same state with ever newer times.
      version++;
      store.records.set(next.name, {
        ...next,
        state: 'PENDING',
        updateTime: `2026-11-30T00:00:00.${String(version).padStart(9, '0')}Z`,
        version: 100 + version,
      });
    };
    const sleeps: number[] = [];
    const error = await ingest(running, { store, clock, maxAttempts: 4, sleep: async (ms) => void sleeps.push(ms), random: () => 1 }).catch(
      (e) => e,
    );
    expect(error).toBeInstanceOf(NotRecordedError);
    expect(error.reason).toBe('retries-exhausted');
    expect(sleeps).toEqual([10, 20, 40]);
  });

  it('reports not-recorded when the store is unavailable', async () => {
    const store = new MemoryStore();
    store.failReads = true;
    const error = await ingest(succeeded, { store, clock }).catch((e) => e);
    expect(error).toBeInstanceOf(NotRecordedError);
    expect(error.reason).toBe('store-unavailable');
    expect(error.cause).toBeInstanceOf(Error);
  });
});
