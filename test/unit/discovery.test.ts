/** The discovery sweep's bounds and decisions, on a scripted batch list and an in-memory store. */
import { describe, expect, it } from 'vitest';
import { StoreRejectedError } from '../../app/ports.ts';
import { BatchDiscovery, DISCOVERY_INTERVAL_MS, DISCOVERY_RETRY_MS, DISCOVERY_WINDOW_MS } from '../../app/reconcile/discovery.ts';
import { type GeminiBatchLister, geminiBatches } from '../../providers/gemini/events.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { silentLogger } from '../support/silent-logger.ts';

const NOW = Date.parse('2026-12-04T12:00:00Z');
const ago = (ms: number) => new Date(NOW - ms).toISOString();

/** `count` batches, newest first, one minute apart; pages by offset; `token` overrides the next-page token. */
function lister(count: number, options: { token?: (offset: number) => string | undefined; fail?: boolean } = {}) {
  const calls: Array<string | undefined> = [];
  const batches = Array.from({ length: count }, (_, i) => ({
    name: `batches/listed-${i}`,
    state: 'JOB_STATE_RUNNING',
    createTime: ago((i + 1) * 60_000),
    updateTime: ago(i * 60_000),
  }));
  const api: GeminiBatchLister = {
    async listBatches({ pageSize, pageToken }) {
      calls.push(pageToken);
      if (options.fail) throw new Error('Gemini answered 500');
      const offset = Number(pageToken ?? 0);
      const next = offset + pageSize < count ? String(offset + pageSize) : undefined;
      const nextPageToken = options.token ? options.token(offset) : next;
      return { batches: batches.slice(offset, offset + pageSize), ...(nextPageToken !== undefined && { nextPageToken }) };
    },
  };
  return { api, calls, batches };
}

function discovery(
  api: GeminiBatchLister,
  store = new MemoryStore(),
  clock = { now: NOW },
  options: { maxPages?: number; pageSize?: number } = {},
) {
  return {
    store,
    clock,
    sweeper: new BatchDiscovery({ lister: geminiBatches(api), store, logger: silentLogger, clock: () => clock.now, ...options }),
  };
}

describe('BatchDiscovery', () => {
  it('adopts batches nobody tracked, at the state Gemini lists; known ones are not adopted again', async () => {
    const { api } = lister(3);
    const { store, sweeper } = discovery(api);
    expect(await sweeper.sweepIfDue()).toEqual({ adopted: 3, listed: 3, pages: 1 });
    expect(await store.get('batches/listed-0')).toMatchObject({ state: 'RUNNING', source: 'poll', version: 1 });

    const again = discovery(api, store, { now: NOW + DISCOVERY_INTERVAL_MS });
    expect(await again.sweeper.sweepIfDue()).toEqual({ adopted: 0, listed: 3, pages: 1 });
  });

  it('sweeps at most once an interval, and retries a failed sweep after a few minutes', async () => {
    const { api, calls } = lister(2);
    const { sweeper, clock } = discovery(api);
    expect(await sweeper.sweepIfDue()).toBeDefined();
    clock.now += DISCOVERY_INTERVAL_MS - 1;
    expect(await sweeper.sweepIfDue()).toBeUndefined();
    expect(calls).toHaveLength(1);
    clock.now += 1;
    expect(await sweeper.sweepIfDue()).toBeDefined();

    const failing = discovery(lister(2, { fail: true }).api);
    expect(await failing.sweeper.sweepIfDue()).toBeUndefined();
    failing.clock.now += DISCOVERY_RETRY_MS - 1;
    expect(await failing.sweeper.sweepIfDue()).toBeUndefined();
  });

  it('bounds its paging: a page limit, a repeated or empty next-page token, the first batch older than the window', async () => {
    const many = lister(40);
    const bounded = discovery(many.api, undefined, undefined, { maxPages: 3, pageSize: 5 });
    expect(await bounded.sweeper.sweepIfDue()).toMatchObject({ pages: 3, listed: 15, adopted: 15 });
    expect(many.calls).toEqual([undefined, '5', '10']);

    const looping = lister(10, { token: () => 'same' });
    const loop = discovery(looping.api, undefined, undefined, { pageSize: 5 });
    expect(await loop.sweeper.sweepIfDue()).toMatchObject({ pages: 2 });
    expect(looping.calls).toEqual([undefined, 'same']);

    const empty = lister(10, { token: () => '' });
    expect(await discovery(empty.api, undefined, undefined, { pageSize: 5 }).sweeper.sweepIfDue()).toMatchObject({ pages: 1 });

    // Created one a minute: with the window two days, a list of three days' batches stops at the first older one.
    const old = lister(3 * 24 * 60);
    const windowed = await discovery(old.api, undefined, undefined, { pageSize: 1_000 }).sweeper.sweepIfDue();
    expect(windowed).toMatchObject({ pages: 3, listed: DISCOVERY_WINDOW_MS / 60_000 });
  });

  it('skips a batch whose answer cannot be read or that the store refuses for good, and adopts the rest', async () => {
    const { api, batches } = lister(3);
    Object.assign(batches[0] as object, { state: 'JOB_STATE_SOMETHING_NEW' });
    const store = new MemoryStore();
    const write = store.write.bind(store);
    store.write = async (record, expected) => {
      if (record.name === 'batches/listed-1') throw new StoreRejectedError('ValidationException: item too large');
      return write(record, expected);
    };
    expect(await discovery(api, store).sweeper.sweepIfDue()).toEqual({ adopted: 1, listed: 3, pages: 1 });
    expect(await store.get('batches/listed-2')).toMatchObject({ state: 'RUNNING' });
    // The store unavailable: the sweep fails as a whole, and is tried again after a few minutes.
    store.write = async () => {
      throw new Error('ECONNREFUSED');
    };
    expect(await discovery(lister(1).api, store).sweeper.sweepIfDue()).toBeUndefined();
  });

  it('leaves a batch Ratchet knows to the poller, even when the list says more', async () => {
    const { api, batches } = lister(1);
    const store = new MemoryStore();
    await discovery(api, store).sweeper.sweepIfDue();
    Object.assign(batches[0] as object, { state: 'JOB_STATE_SUCCEEDED', updateTime: ago(0) });
    expect(await discovery(api, store).sweeper.sweepIfDue()).toMatchObject({ adopted: 0, listed: 1 });
    expect(await store.get('batches/listed-0')).toMatchObject({ state: 'RUNNING', version: 1 });
  });
});
