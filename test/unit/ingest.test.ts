import { describe, expect, it } from 'vitest';
import type { OperationEvent, OperationRecord } from '../../lambda/core/reducer.ts';
import { ingest, NotRecordedError, RecentRecords } from '../../lambda/ingest.ts';
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

  it('on a lost race, names the discard from the winner the refusal returned: one request, no read', async () => {
    const store = new MemoryStore();
    // The seed's race: a poll that read "no record yet" loses to the SUCCEEDED webhook.
    const winner = new MemoryStore();
    await ingest(succeeded, { store: winner, clock });
    store.beforeWrite = () => {
      store.beforeWrite = undefined;
      store.records = new Map(winner.records);
    };
    const result = await ingest(running, { store, clock, sleep: noSleep });
    expect(result).toMatchObject({ outcome: 'discarded', reason: 'regress-from-terminal', attempts: 1 });
    expect(store.records.get('batches/1')?.state).toBe('SUCCEEDED');
    expect(store.requests).toEqual(['apply']);
  });

  it('sends a same-state refresh as a state change first, then as a refresh once the refusal shows the state', async () => {
    const store = new MemoryStore();
    await ingest(running, { store, clock });
    const later = { ...running, updateTime: '2026-11-30T10:05:00.000000000Z' };
    expect(await ingest(later, { store, clock })).toMatchObject({ outcome: 'applied', stateChanged: false, attempts: 2 });
    expect(store.records.get('batches/1')).toMatchObject({ version: 2, stateChanged: false, previousState: 'RUNNING' });
    expect(store.requests).toEqual(['apply', 'apply', 'apply']);
  });

  it('with the record at hand (reconcile) picks the right variant at once, and a discard against it costs no request', async () => {
    const store = new MemoryStore();
    await ingest(running, { store, clock });
    const current = store.records.get('batches/1');
    const later = { ...running, updateTime: '2026-11-30T10:05:00.000000000Z' };
    expect(await ingest(later, { store, clock, current })).toMatchObject({ outcome: 'applied', stateChanged: false, attempts: 1 });
    const stale = { ...running, updateTime: '2026-11-30T09:00:00.000000000Z' };
    expect(await ingest(stale, { store, clock, current })).toMatchObject({
      outcome: 'discarded',
      reason: 'stale-or-equal-update-time',
      attempts: 0,
    });
    expect(store.requests).toEqual(['apply', 'apply']);
  });

  it('with a hint of the last record seen: a same-state refresh is one request, a stale event none, a duplicate is asked', async () => {
    const store = new MemoryStore();
    const hints = new RecentRecords();
    await ingest({ ...running, eventId: 'msg_r' }, { store, clock, hints });
    const later = { ...running, updateTime: '2026-11-30T10:05:00.000000000Z' };
    expect(await ingest(later, { store, clock, hints })).toMatchObject({ outcome: 'applied', stateChanged: false, attempts: 1 });
    expect(await ingest(running, { store, clock, hints })).toMatchObject({
      outcome: 'discarded',
      reason: 'stale-or-equal-update-time',
      attempts: 0,
    });
    expect(store.requests).toEqual(['apply', 'apply']);
    expect(hints.get('batches/1')?.version).toBe(2);
    // A duplicate of the hint is not final: the stored record may have moved past it.
    hints.set({ ...(store.records.get('batches/1') as OperationRecord), version: 3, eventId: 'msg_x' });
    const redelivery = { ...later, eventId: 'msg_x', updateTime: '2026-11-30T10:09:00.000000000Z' };
    expect(await ingest(redelivery, { store, clock, hints })).toMatchObject({ outcome: 'applied', attempts: 2 });
  });

  it('falls back to read-reduce-compare-version for an item written before rank was stored', async () => {
    const store = new MemoryStore();
    await ingest(running, { store, clock });
    store.legacy.add('batches/1');
    expect(await ingest(succeeded, { store, clock })).toMatchObject({ outcome: 'applied', stateChanged: true, attempts: 2 });
    expect(store.requests).toEqual(['apply', 'apply', 'write']);
  });

  it('reports not-recorded (never success) when every compare-and-swap attempt loses', async () => {
    const store = new MemoryStore();
    store.legacy.add('batches/1');
    store.records.set('batches/1', { ...(await ingestInto(new MemoryStore(), running)), version: 1 });
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
    expect(store.requests).toEqual(['apply', 'write', 'write', 'write', 'write']);
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

async function ingestInto(store: MemoryStore, event: OperationEvent) {
  const result = await ingest(event, { store, clock });
  return result.record;
}
