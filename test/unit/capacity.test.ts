/** test/support/aws/capacity.ts against DynamoDB's documented rules, worked by hand. */
import { describe, expect, it } from 'vitest';
import { CapacityCounter, hottest, itemSize, type TableShape, writeCost } from '../support/aws/capacity.ts';

const table: TableShape = {
  name: 't',
  partitionKey: 'pk',
  indexes: [
    { name: 'keys', partitionKey: 'g', sortKey: 's', projection: 'KEYS_ONLY' },
    { name: 'some', partitionKey: 'g', projection: ['a'] },
    { name: 'all', partitionKey: 'h', projection: 'ALL' },
  ],
};

describe('write capacity', () => {
  it('sizes an item as its names and values: strings in UTF-8 bytes, numbers a byte per two digits and one, maps and lists 3 bytes and one per element', () => {
    expect(itemSize({ pk: { S: 'abc' } })).toBe(2 + 3);
    expect(itemSize({ n: { N: '12345' } })).toBe(1 + 3 + 1);
    expect(itemSize({ n: { N: '-0.0012300' } })).toBe(1 + 2 + 1); // 123: leading and trailing zeros do not count
    expect(itemSize({ é: { S: 'é' } })).toBe(2 + 2);
    expect(itemSize({ b: { BOOL: true }, z: { NULL: true } })).toBe(1 + 1 + 1 + 1);
    expect(itemSize({ m: { M: { x: { S: 'yz' } } } })).toBe(1 + 3 + (1 + 2 + 1));
    expect(itemSize({ l: { L: [{ S: 'a' }, { N: '1' }] } })).toBe(1 + 3 + (1 + 1) + (2 + 1));
  });

  it('bills a write the larger image in whole kilobytes, at least one', () => {
    const small = { pk: { S: 'k' } };
    const big = { pk: { S: 'k' }, v: { S: 'x'.repeat(1022) } }; // 2 + 1 + 1 + 1022 = 1026 bytes
    expect(writeCost(table, undefined, small).table).toEqual({ partition: 'k', units: 1 });
    expect(writeCost(table, big, small).table.units).toBe(2);
    expect(writeCost(table, small, undefined).table.units).toBe(1);
  });

  it('writes an index when the item enters or leaves it, twice when a key moves, once when a projected attribute changes, never otherwise', () => {
    const base = { pk: { S: 'k' }, a: { S: '1' }, b: { S: '1' } };
    const indexed = { ...base, g: { S: 'p1' }, s: { S: 's1' } };
    expect(writeCost(table, base, indexed).indexes).toEqual({
      keys: [{ partition: 'p1', units: 1 }],
      some: [{ partition: 'p1', units: 1 }],
    });
    expect(writeCost(table, indexed, base).indexes).toEqual({
      keys: [{ partition: 'p1', units: 1 }],
      some: [{ partition: 'p1', units: 1 }],
    });
    // The sort key moves: out and in again on `keys`; `some` has no sort key, and nothing it projects changed.
    expect(writeCost(table, indexed, { ...indexed, s: { S: 's2' } }).indexes).toEqual({
      keys: [
        { partition: 'p1', units: 1 },
        { partition: 'p1', units: 1 },
      ],
    });
    // The partition moves: the old entry leaves p1, the new one enters p2.
    expect(writeCost(table, indexed, { ...indexed, g: { S: 'p2' } }).indexes.keys).toEqual([
      { partition: 'p1', units: 1 },
      { partition: 'p2', units: 1 },
    ]);
    expect(writeCost(table, indexed, { ...indexed, a: { S: '2' } }).indexes).toEqual({ some: [{ partition: 'p1', units: 1 }] });
    expect(writeCost(table, indexed, { ...indexed, b: { S: '2' } }).indexes).toEqual({});
    // ALL: any attribute; the index entry sized as the whole item.
    const all = { ...base, h: { S: 'q' } };
    expect(writeCost(table, all, { ...all, b: { S: 'x'.repeat(1100) } }).indexes).toEqual({ all: [{ partition: 'q', units: 2 }] });
  });

  it('tallies units per partition of each table and index, and names the hottest', () => {
    const counter = new CapacityCounter();
    for (const [key, g] of [
      ['a', 'p1'],
      ['b', 'p1'],
      ['c', 'p2'],
    ])
      counter.add(table, undefined, { pk: { S: key as string }, g: { S: g as string }, s: { S: '1' } });
    counter.addRecord(table, { dynamodb: { OldImage: { pk: { S: 'a' } }, NewImage: { pk: { S: 'a' }, b: { S: '2' } } } });
    expect(counter.of('t')).toMatchObject({ units: 4, writes: 4 });
    expect(hottest(counter.of('t/keys'))).toEqual({ partition: 'p1', units: 2, share: 2 / 3 });
    expect(counter.of('t/all').units).toBe(0);
  });
});
