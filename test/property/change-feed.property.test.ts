/**
 * The change feed against a model, on a real SQLite file: for any sequence of
 * writes (tracks and events of a few operations), any cursor, any filter and
 * any page size, reading page by page returns exactly the outbox's changes
 * after the cursor that match, in commit order, none twice; whether the pages
 * come from the file (nobody waiting) or from the feed's memory of the latest
 * changes (filled while waiters are held), and whether a waiter held before
 * the writes or a reader after them gets them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OPERATION_STATES, type OperationState } from '../../core/lifecycle.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { ChangeFeed, type FeedFilter, type OperationChange } from '../../engines/sqlite/change-feed.ts';
import { openDataFolder } from '../../engines/sqlite/data-folder.ts';
import { SqliteOperationStore } from '../../engines/sqlite/operation-store.ts';
import { outboxChanges } from '../support/engine-file.ts';

const NAMES = ['batches/a', 'batches/b', 'interactions/c', 'interactions/d'];

const writeArb = fc.oneof(
  fc.record({ type: fc.constant('track' as const), name: fc.constantFrom(...NAMES) }),
  fc.record({
    type: fc.constant('event' as const),
    name: fc.constantFrom(...NAMES),
    state: fc.constantFrom<OperationState>('RUNNING', 'REQUIRES_ACTION', 'SUCCEEDED', 'FAILED'),
    second: fc.integer({ min: 0, max: 59 }),
  }),
);
const filterArb: fc.Arbitrary<FeedFilter> = fc.record(
  {
    name: fc.constantFrom(...NAMES),
    kind: fc.constantFrom('batch' as const, 'interaction' as const),
    state: fc.constantFrom(...OPERATION_STATES),
  },
  { requiredKeys: [] },
);

/** Reads every page after `after` until the feed says it is complete. */
function readAll(feed: ChangeFeed, after: number, filter: FeedFilter, limit: number): OperationChange[] {
  const all: OperationChange[] = [];
  let cursor = after;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = feed.read(cursor, filter, limit);
    all.push(...page.changes);
    if (page.complete && page.changes.length < limit) return all;
    cursor = page.cursor;
  }
  throw new Error('the feed never completed');
}

const matching = (filter: FeedFilter) => (change: { name: string; kind: string; state: OperationState | null }) =>
  (filter.name === undefined || change.name === filter.name) &&
  (filter.kind === undefined || change.kind === filter.kind) &&
  (filter.state === undefined || change.state === filter.state);

describe('the change feed', () => {
  it('gives a reader that does not wait what was committed while nobody waited, after a long poll filled its memory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ratchet-feed-'));
    const data = openDataFolder(dir);
    try {
      const feed = new ChangeFeed(data.db);
      const store = new SqliteOperationStore(data.db, () => feed.notify());
      const at = '2026-12-05T10:00:00.000000000Z';
      // A long poll held, woken by the first write: the feed's memory now ends at that write.
      const held = feed.next(0, {}, 10, 60_000);
      await store.write(trackedRecord('batches/a', 'batch', at), undefined);
      const first = await held;
      expect(first.changes.map((change) => change.name)).toEqual(['batches/a']);
      // Written while nobody waits: no dispatch brings them into memory.
      await store.write(trackedRecord('batches/b', 'batch', at), undefined);
      await store.write(trackedRecord('interactions/c', 'interaction', at), undefined);
      const plain = await feed.next(first.cursor, {}, 10, 0);
      expect(plain.changes.map((change) => change.name)).toEqual(['batches/b', 'interactions/c']);
      expect(feed.read(first.cursor, {}, 10).changes).toHaveLength(2);
    } finally {
      data.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the change feed (property)', () => {
  it('pages from the file or from memory, and waiters, return exactly the matching changes after the cursor, in commit order', {
    timeout: 120_000,
  }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(writeArb, { minLength: 1, maxLength: 60 }),
        filterArb,
        fc.integer({ min: 1, max: 7 }),
        fc.nat(),
        fc.boolean(),
        async (writes, filter, limit, start, holdWaiters) => {
          const dir = mkdtempSync(join(tmpdir(), 'ratchet-feed-property-'));
          const data = openDataFolder(dir);
          try {
            const feed = new ChangeFeed(data.db);
            const store = new SqliteOperationStore(data.db, () => feed.notify());
            // A waiter held from the start (fills the feed's memory as the writes commit), and one on the filter.
            const stop = new AbortController();
            const waiters = holdWaiters
              ? [feed.next(0, {}, 1_000, 60_000, stop.signal), feed.next(0, filter, limit, 60_000, stop.signal)]
              : [];
            // A stream-like reader: page after page from its cursor as the writes commit (from memory, mostly).
            const streamed: OperationChange[] = [];
            let streamCursor = 0;
            const streaming = (async () => {
              while (!stop.signal.aborted) {
                const page = await feed.next(streamCursor, filter, limit, 60_000, stop.signal);
                streamed.push(...page.changes);
                streamCursor = page.cursor;
              }
            })();
            for (const write of writes) {
              if (write.type === 'track') {
                const record = trackedRecord(
                  write.name,
                  write.name.startsWith('batches/') ? 'batch' : 'interaction',
                  '2026-12-05T10:00:00.000000000Z',
                );
                await store.write(record, undefined);
              } else {
                await store.apply(
                  {
                    name: write.name,
                    kind: write.name.startsWith('batches/') ? 'batch' : 'interaction',
                    state: write.state,
                    providerState: write.state,
                    updateTime: `2026-12-05T10:00:${String(write.second).padStart(2, '0')}.000000000Z`,
                    source: 'webhook',
                  },
                  '2026-12-05T10:01:00.000000000Z',
                );
              }
            }
            await new Promise((resolve) => setImmediate(resolve));
            await new Promise((resolve) => setImmediate(resolve));
            const model = outboxChanges(join(dir, 'ratchet.db'));
            const head = model.at(-1)?.seq ?? 0;
            const after = head === 0 ? 0 : start % (head + 1);
            const expected = model.filter((change) => change.seq > after && matching(filter)(change)).map((change) => change.seq);
            const seqOf = (change: OperationChange) => feed.seqOf(change.cursor) as number;

            expect(readAll(feed, after, filter, limit).map(seqOf)).toEqual(expected);
            // A waiter held before the writes got the first matching changes (the first round's, at most its page);
            // one whose filter matched nothing is let go. Going on from its cursor gives the rest: none twice, none missing.
            // Let the reader catch up, then stop it: it saw every matching change once, in order.
            for (let i = 0; i < 20 && streamCursor < head; i++) await new Promise((resolve) => setImmediate(resolve));
            stop.abort();
            await streaming;
            const rest = readAll(feed, streamCursor, filter, limit).map(seqOf);
            expect([...streamed.map(seqOf), ...rest]).toEqual(model.filter(matching(filter)).map((change) => change.seq));
            if (holdWaiters) {
              for (const [i, waited] of (await Promise.all(waiters)).entries()) {
                const wanted = model.filter(matching(i === 0 ? {} : filter)).map((change) => change.seq);
                const got = waited.changes.map(seqOf);
                expect(got).toEqual(wanted.slice(0, got.length));
                expect(got.length).toBeLessThanOrEqual(i === 0 ? 1_000 : limit);
                if (wanted.length > 0) expect(got.length).toBeGreaterThan(0);
                const rest = readAll(feed, waited.cursor, i === 0 ? {} : filter, limit).map(seqOf);
                expect([...got, ...rest]).toEqual(wanted);
              }
            }
            // Each change is the record its write made.
            for (const change of readAll(feed, 0, {}, 50)) {
              const written = model.find((row) => row.seq === seqOf(change));
              expect(change).toMatchObject({
                name: written?.name,
                version: written?.version,
                state: written?.state,
                writeKind: written?.writeKind,
              });
            }
          } finally {
            data.close();
            rmSync(dir, { recursive: true, force: true });
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
