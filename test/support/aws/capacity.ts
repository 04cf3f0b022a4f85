/**
 * Write capacity counted from what was written, as DynamoDB bills it: for
 * each write (a stream record's OldImage/NewImage, or an item's before and
 * after) the write units on the table (the larger of the two images, by
 * DynamoDB's item size rules, in 1 KB units, at least 1) and on each global
 * secondary index (a write when the item enters or leaves the index, two
 * when one of the index's key attributes moves, one when an attribute the
 * index projects changes, none otherwise; each sized by the projected item),
 * and per partition key value of the table and of each index, so the
 * hottest partition's share can be read off the keys actually written (moto
 * does not model partition throughput). The tests and the bench use it.
 */
import type { AttributeValue, GlobalSecondaryIndexDescription, KeySchemaElement, TableDescription } from '@aws-sdk/client-dynamodb';

/** An item as a stream record or the low-level client carries it. */
export type Image = Record<string, AttributeValue>;

export interface IndexShape {
  name: string;
  partitionKey: string;
  sortKey?: string;
  /** `ALL`, `KEYS_ONLY`, or the non-key attributes an INCLUDE projection carries. */
  projection: 'ALL' | 'KEYS_ONLY' | readonly string[];
}

export interface TableShape {
  name: string;
  partitionKey: string;
  sortKey?: string;
  indexes: IndexShape[];
}

/** A table's shape from DescribeTable (or a CreateTable request: the same fields). */
export function shapeOf(table: Pick<TableDescription, 'TableName' | 'KeySchema' | 'GlobalSecondaryIndexes'>): TableShape {
  const keys = (schema: KeySchemaElement[] | undefined) => ({
    partitionKey: schema?.find((key) => key.KeyType === 'HASH')?.AttributeName as string,
    ...(schema?.some((key) => key.KeyType === 'RANGE') && { sortKey: schema.find((key) => key.KeyType === 'RANGE')?.AttributeName }),
  });
  return {
    name: table.TableName as string,
    ...keys(table.KeySchema),
    indexes: (table.GlobalSecondaryIndexes ?? []).map((index: GlobalSecondaryIndexDescription) => ({
      name: index.IndexName as string,
      ...keys(index.KeySchema),
      projection:
        index.Projection?.ProjectionType === 'INCLUDE'
          ? (index.Projection.NonKeyAttributes ?? [])
          : ((index.Projection?.ProjectionType ?? 'ALL') as 'ALL' | 'KEYS_ONLY'),
    })),
  };
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

/** A number's size: about one byte per two significant digits, plus one. */
function numberSize(text: string): number {
  const digits = text.replace(/^-/, '').replace(/e.*$/i, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '');
  return Math.ceil(Math.max(digits.length, 1) / 2) + 1;
}

/** One value's size, by DynamoDB's rules (a map or list: 3 bytes, and 1 more per element). */
function valueSize(value: AttributeValue | Record<string, never>): number {
  const v = value as Record<string, unknown>;
  if (v.S !== undefined) return utf8(v.S as string);
  if (v.N !== undefined) return numberSize(v.N as string);
  if (v.B !== undefined) return (v.B as Uint8Array).length;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.SS !== undefined) return (v.SS as string[]).reduce((sum, s) => sum + utf8(s), 0);
  if (v.NS !== undefined) return (v.NS as string[]).reduce((sum, n) => sum + numberSize(n), 0);
  if (v.BS !== undefined) return (v.BS as Uint8Array[]).reduce((sum, b) => sum + b.length, 0);
  if (v.L !== undefined) return 3 + (v.L as AttributeValue[]).reduce((sum, element) => sum + valueSize(element) + 1, 0);
  if (v.M !== undefined)
    return 3 + Object.entries(v.M as Image).reduce((sum, [name, element]) => sum + utf8(name) + valueSize(element) + 1, 0);
  return 3; // an empty map as the streams client decodes it (no type)
}

/** An item's size in bytes: each attribute's name and value. */
export function itemSize(item: Image): number {
  return Object.entries(item).reduce((sum, [name, value]) => sum + utf8(name) + valueSize(value), 0);
}

/** Write units for an item of `bytes` (standard writes: 1 KB each, at least one). */
export const writeUnits = (bytes: number): number => Math.max(1, Math.ceil(bytes / 1024));

/** A canonical text of a value, so two images compare equal whatever order their map keys came in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical((value as Record<string, unknown>)[key])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

const keyValue = (value: AttributeValue | undefined): string | undefined =>
  value === undefined ? undefined : ((value.S ?? value.N ?? (value.B && Buffer.from(value.B).toString('base64'))) as string | undefined);

/** The item as the index holds it, or undefined when the item is not in the index (a key attribute missing). */
function projected(table: TableShape, index: IndexShape, item: Image | undefined): Image | undefined {
  if (!item) return undefined;
  const keys = [index.partitionKey, index.sortKey, table.partitionKey, table.sortKey].filter((key): key is string => key !== undefined);
  if (keyValue(item[index.partitionKey]) === undefined || (index.sortKey && keyValue(item[index.sortKey]) === undefined)) return undefined;
  if (index.projection === 'ALL') return item;
  const wanted = new Set([...keys, ...(index.projection === 'KEYS_ONLY' ? [] : index.projection)]);
  return Object.fromEntries(Object.entries(item).filter(([name]) => wanted.has(name)));
}

/** One write to a partition: its units. */
export interface PartitionWrite {
  partition: string;
  units: number;
}

/** What one write cost on the table and on each of its indexes (indexes it did not touch are left out). */
export interface WriteCost {
  table: PartitionWrite;
  indexes: Record<string, PartitionWrite[]>;
}

/** The cost of the write that turned `before` into `after` (either absent: a put of a new item, a delete). */
export function writeCost(table: TableShape, before: Image | undefined, after: Image | undefined): WriteCost {
  const item = (after ?? before) as Image;
  const cost: WriteCost = {
    table: {
      partition: keyValue(item[table.partitionKey]) as string,
      units: writeUnits(Math.max(before ? itemSize(before) : 0, after ? itemSize(after) : 0)),
    },
    indexes: {},
  };
  for (const index of table.indexes) {
    const old = projected(table, index, before);
    const next = projected(table, index, after);
    const writes: PartitionWrite[] = [];
    const put = (image: Image) =>
      writes.push({ partition: keyValue(image[index.partitionKey]) as string, units: writeUnits(itemSize(image)) });
    if (old && next) {
      const moved = [index.partitionKey, index.sortKey].some((key) => key && canonical(old[key]) !== canonical(next[key]));
      if (moved) {
        put(old); // the old entry deleted
        put(next);
      } else if (canonical(old) !== canonical(next))
        writes.push({
          partition: keyValue(next[index.partitionKey]) as string,
          units: writeUnits(Math.max(itemSize(old), itemSize(next))),
        });
    } else if (old) put(old);
    else if (next) put(next);
    if (writes.length > 0) cost.indexes[index.name] = writes;
  }
  return cost;
}

/** A table's or an index's tally. */
export interface Tally {
  /** Write units in all. */
  units: number;
  /** Write requests (an index's key move counts two). */
  writes: number;
  /** Write units per partition key value. */
  partitions: Map<string, number>;
}

/** The hottest partition of a tally and its share of the units. */
export function hottest(tally: Tally): { partition: string; units: number; share: number } {
  let top = { partition: '', units: 0 };
  for (const [partition, units] of tally.partitions) if (units > top.units) top = { partition, units };
  return { ...top, share: tally.units === 0 ? 0 : top.units / tally.units };
}

const emptyTally = (): Tally => ({ units: 0, writes: 0, partitions: new Map() });

/** Writes counted per table and per index (`<table>/<index>`), and per partition in each. */
export class CapacityCounter {
  readonly tallies = new Map<string, Tally>();

  /** One write of `table`, from its before and after images. */
  add(table: TableShape, before: Image | undefined, after: Image | undefined): WriteCost {
    const cost = writeCost(table, before, after);
    this.count(table.name, [cost.table]);
    for (const [index, writes] of Object.entries(cost.indexes)) this.count(`${table.name}/${index}`, writes);
    return cost;
  }

  /** One stream record of `table` (NEW_AND_OLD_IMAGES). */
  addRecord(table: TableShape, record: { dynamodb?: { OldImage?: Image; NewImage?: Image } }): WriteCost {
    return this.add(table, record.dynamodb?.OldImage, record.dynamodb?.NewImage);
  }

  /** The tally of a table, or of `<table>/<index>` (empty when nothing was written there). */
  of(name: string): Tally {
    return this.tallies.get(name) ?? emptyTally();
  }

  private count(name: string, writes: PartitionWrite[]): void {
    const tally = this.tallies.get(name) ?? emptyTally();
    for (const { partition, units } of writes) {
      tally.units += units;
      tally.writes++;
      tally.partitions.set(partition, (tally.partitions.get(partition) ?? 0) + units);
    }
    this.tallies.set(name, tally);
  }
}
