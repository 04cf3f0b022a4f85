/**
 * The DynamoDB list's merge of its shards (engines/dynamodb/recent-operations.ts), against an in-memory index
 * that answers Query as DynamoDB does (Limit counts the items evaluated, before the filter; LastEvaluatedKey whenever
 * the limit was reached): paged as the operation store pages it, every item comes out once, newest first, whatever
 * the shards hold, the page size or the filter; and what a page reads stays near what it hands out.
 */
import type { QueryCommand } from '@aws-sdk/lib-dynamodb';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ListFilter } from '../../app/ports.ts';
import { cursorOf, MAX_LIST_ROUNDS, positionOf, RecentOperations } from '../../engines/dynamodb/recent-operations.ts';
import { LIST_SHARDS, listShardOf, RECENT_INDEX_PARTITION, RECENT_INDEX_SORT } from '../../engines/dynamodb/tables.ts';

interface Item {
  name: string;
  state: string;
  [RECENT_INDEX_PARTITION]: string;
  [RECENT_INDEX_SORT]: string;
}

/** The recent-operations index in memory: Query on one shard, newest first, `#sort < :before`, `#state = :state`. */
function memoryIndex(items: Item[]) {
  const read = { items: 0, queries: 0, units: 0 };
  const client = {
    send: async (command: QueryCommand) => {
      const { ExpressionAttributeValues: values = {}, Limit, ExclusiveStartKey: start, FilterExpression } = command.input;
      const below = (values[':before'] as string | undefined) ?? '\uffff';
      const from = (start?.[RECENT_INDEX_SORT] as string | undefined) ?? below;
      const shard = items
        .filter((item) => item[RECENT_INDEX_PARTITION] === values[':shard'] && item[RECENT_INDEX_SORT] < from)
        .sort((a, b) => (a[RECENT_INDEX_SORT] < b[RECENT_INDEX_SORT] ? 1 : -1));
      const evaluated = shard.slice(0, Limit);
      read.items += evaluated.length;
      read.queries++;
      // Eventually consistent: half a unit per 4 KB a query reads, rounded up (an index item is about 150 bytes).
      read.units += Math.max(1, Math.ceil((evaluated.length * 150) / 4096)) / 2;
      const last = evaluated.at(-1);
      const matching = FilterExpression ? evaluated.filter((item) => item.state === values[':state']) : evaluated;
      return {
        Items: matching,
        Count: matching.length,
        ScannedCount: evaluated.length,
        ...(last && evaluated.length === Limit && { LastEvaluatedKey: { name: last.name, ...pick(last) } }),
      };
    },
  };
  return { client: client as never, read };
}

const pick = (item: Item) => ({ [RECENT_INDEX_PARTITION]: item[RECENT_INDEX_PARTITION], [RECENT_INDEX_SORT]: item[RECENT_INDEX_SORT] });

/** One page's names, as DynamoDBOperationStore.list reads them: until it is full, the list ends, or its rounds run out. */
async function pageOf(recent: RecentOperations, limit: number): Promise<string[]> {
  const names: string[] = [];
  while (names.length < limit && !recent.done && recent.rounds < MAX_LIST_ROUNDS) names.push(...(await recent.next(limit - names.length)));
  return names;
}

/** `count` operations recorded 17 s apart over the day, each in the state `stateOf` gives it. */
function spread(count: number, stateOf: (i: number) => string): Item[] {
  return Array.from({ length: count }, (_, i): Item => {
    const name = `batches/${i}`;
    const recordedAt = new Date(Date.UTC(2026, 11, 7) + i * 17_000).toISOString();
    return { name, state: stateOf(i), [RECENT_INDEX_PARTITION]: listShardOf(name), [RECENT_INDEX_SORT]: `${recordedAt}#${name}` };
  });
}

/** Pages through the list as DynamoDBOperationStore.list does (names only: the views' read and re-check left aside). */
async function pageAll(items: Item[], filter: Omit<ListFilter, 'limit' | 'cursor'>, limit: number) {
  const { client, read } = memoryIndex(items);
  const pages: string[][] = [];
  const reads: number[] = [];
  let cursor: string | undefined;
  do {
    const before = read.items;
    const recent = new RecentOperations(client, 'history', { ...filter, limit }, cursor === undefined ? undefined : positionOf(cursor));
    pages.push(await pageOf(recent, limit));
    reads.push(read.items - before);
    const position = recent.position;
    cursor = position === undefined ? undefined : cursorOf(position);
    if (pages.length > items.length + 5) throw new Error('the list does not end');
  } while (cursor);
  return { pages, reads };
}

const itemsArbitrary = fc
  .uniqueArray(fc.tuple(fc.integer({ min: 0, max: 86_400 }), fc.integer({ min: 0, max: 99_999 })), {
    maxLength: 400,
    size: 'max',
    selector: ([, id]) => id,
  })
  .chain((keys) =>
    fc.tuple(
      fc.constant(keys),
      // A common, a middling and a rare state: a filter on each lets through most, a third, or a few in a hundred.
      fc.array(
        fc.oneof(
          { arbitrary: fc.constant('RUNNING'), weight: 12 },
          { arbitrary: fc.constant('SUCCEEDED'), weight: 6 },
          { arbitrary: fc.constant('FAILED'), weight: 1 },
        ),
        { minLength: keys.length, maxLength: keys.length },
      ),
    ),
  )
  .map(([keys, states]) =>
    keys.map(([second, id], i): Item => {
      const name = `batches/${id}`;
      const recordedAt = new Date(Date.UTC(2026, 11, 7) + second * 1000).toISOString();
      return {
        name,
        state: states[i] as string,
        [RECENT_INDEX_PARTITION]: listShardOf(name),
        [RECENT_INDEX_SORT]: `${recordedAt}#${name}`,
      };
    }),
  );

const newestFirst = (items: Item[]) =>
  [...items].sort((a, b) => (a[RECENT_INDEX_SORT] < b[RECENT_INDEX_SORT] ? 1 : -1)).map((item) => item.name);

describe('the DynamoDB list across its shards', () => {
  it('hands out every item once, newest first, at any page size', async () => {
    await fc.assert(
      fc.asyncProperty(itemsArbitrary, fc.integer({ min: 1, max: 120 }), async (items, limit) => {
        const { pages } = await pageAll(items, {}, limit);
        for (const page of pages) expect(page.length).toBeLessThanOrEqual(limit);
        expect(pages.flat()).toEqual(newestFirst(items));
      }),
      { numRuns: 150 },
    );
  });

  it('with a filter, every matching item once, newest first, whether it lets through most items or a few', async () => {
    await fc.assert(
      fc.asyncProperty(
        itemsArbitrary,
        fc.integer({ min: 1, max: 60 }),
        fc.constantFrom('RUNNING', 'SUCCEEDED', 'FAILED'),
        async (items, limit, state) => {
          const { pages } = await pageAll(items, { state: state as ListFilter['state'] }, limit);
          expect(pages.flat()).toEqual(newestFirst(items.filter((item) => item.state === state)));
        },
      ),
      { numRuns: 150 },
    );
  });

  it(`reads a few items per item handed out, not a page's worth from each of its ${LIST_SHARDS} shards`, async () => {
    // 5,000 operations spread over the day: a full unfiltered page's reads, at the console's and the API's limits.
    const items = spread(5_000, () => 'RUNNING');
    const lines: string[] = [];
    for (const limit of [20, 50, 100]) {
      const { client, read } = memoryIndex(items);
      const recent = new RecentOperations(client, 'history', { limit }, undefined);
      const names = await recent.next(limit);
      expect(names).toEqual(newestFirst(items).slice(0, limit));
      lines.push(`limit ${limit}: ${read.items} items read in ${read.queries} queries (${read.units} read units), ${recent.rounds} rounds`);
      expect(read.items, lines.at(-1)).toBeLessThanOrEqual(4 * limit + 2 * LIST_SHARDS);
    }
    console.log(lines.join('\n'));
  });

  it('reads for a filtered page what the filter lets through: a common filter costs what no filter does, a rare one reads more', async () => {
    // 5,000 operations: two in three RUNNING, one in a hundred FAILED (50 in all).
    const items = spread(5_000, (i) => (i % 100 === 0 ? 'FAILED' : i % 3 === 0 ? 'SUCCEEDED' : 'RUNNING'));
    const lines: string[] = [];
    for (const state of ['RUNNING', 'SUCCEEDED', 'FAILED'] as const)
      for (const limit of [20, 50, 100]) {
        const { client, read } = memoryIndex(items);
        const recent = new RecentOperations(client, 'history', { limit, state }, undefined);
        const names = await pageOf(recent, limit);
        expect(names).toEqual(newestFirst(items.filter((item) => item.state === state)).slice(0, limit));
        lines.push(
          `${state} limit ${limit}: ${read.items} items read in ${read.queries} queries (${read.units} read units), ${recent.rounds} rounds`,
        );
        // One query's minimum from each shard, a round or two: as an unfiltered page, where the filter lets most through.
        if (state !== 'FAILED') expect(read.units, lines.at(-1)).toBeLessThanOrEqual(2 * (LIST_SHARDS / 2));
        // A rare one: two rounds, the first a query's minimum from each shard, the second at most FILTERED_READ each.
        else expect(recent.rounds, lines.at(-1)).toBeLessThanOrEqual(2);
      }
    console.log(lines.join('\n'));
  });
});
