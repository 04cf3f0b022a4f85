import { describe, expect, it } from 'vitest';
import { ingest, NotRecordedError, RecentRecords } from '../../app/ingest.ts';
import { WriteContentionError } from '../../app/ports.ts';
import type { OperationEvent, OperationRecord } from '../../core/reducer.ts';
import { MemoryStore } from '../support/memory-store.ts';

const clock = () => new Date('2026-12-01T00:00:00Z');
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

  it('on a lost race, names the discard from the record the refusal handed back: one request, no read', async () => {
    const store = new MemoryStore();
    // The seed's race: a poll that read "no record yet" loses to the SUCCEEDED webhook.
    const winner = new MemoryStore();
    await ingest(succeeded, { store: winner, clock });
    store.beforeWrite = () => {
      store.beforeWrite = undefined;
      store.records = new Map(winner.records);
    };
    const result = await ingest(running, { store, clock });
    expect(result).toMatchObject({ outcome: 'discarded', reason: 'regress-from-terminal', attempts: 1 });
    expect(store.records.get('batches/1')?.state).toBe('SUCCEEDED');
    expect(store.requests).toEqual(['apply']);
  });

  it('with the record at hand (reconcile), a discard against it costs no request; an event it applies is one', async () => {
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

  it('with a hint of the last record seen: a stale event costs none, a duplicate is asked (the stored record may have moved)', async () => {
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
    hints.set({ ...(store.records.get('batches/1') as OperationRecord), version: 3, eventId: 'msg_x' });
    const redelivery = { ...later, eventId: 'msg_x', updateTime: '2026-11-30T10:09:00.000000000Z' };
    expect(await ingest(redelivery, { store, clock, hints })).toMatchObject({ outcome: 'applied', attempts: 1 });
  });

  it('asks again, knowing the record, when the store refused what its own answer shows applies (a race between)', async () => {
    const store = new MemoryStore();
    await ingest(running, { store, clock });
    const apply = store.apply.bind(store);
    let first = true;
    // An engine whose first answer was judged against an older record than it handed back.
    store.apply = async (event, now) => {
      if (!first) return apply(event, now);
      first = false;
      return { ok: false, current: store.records.get(event.name) };
    };
    expect(await ingest(succeeded, { store, clock })).toMatchObject({ outcome: 'applied', attempts: 2, record: { version: 2 } });
  });

  it('reports not-recorded (never success) when the store ran out of attempts, and when it is unavailable', async () => {
    const contended = new MemoryStore();
    contended.apply = async () => {
      throw new WriteContentionError('others kept writing');
    };
    const lost = await ingest(running, { store: contended, clock }).catch((e) => e);
    expect(lost).toBeInstanceOf(NotRecordedError);
    expect(lost.reason).toBe('retries-exhausted');

    const store = new MemoryStore();
    store.failReads = true;
    const error = await ingest(succeeded, { store, clock }).catch((e) => e);
    expect(error).toBeInstanceOf(NotRecordedError);
    expect(error.reason).toBe('store-unavailable');
    expect(error.cause).toBeInstanceOf(Error);
  });
});
