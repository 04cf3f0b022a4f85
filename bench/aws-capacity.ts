/**
 * DynamoDB write units from what a write did, as DynamoDB bills them: the
 * table's from the larger of the item's sizes before and after (1 KB units),
 * each global secondary index's from its entries (a key moved: its old entry
 * deleted and its new one written; a projected attribute changed: one write;
 * nothing it holds changed: none). Item sizes by DynamoDB's published rules
 * (names and values in UTF-8; numbers about one byte per two digits plus one;
 * a map or list 3 bytes plus one per element).
 *
 * One function of the cost model (bench/aws-cost.ts), to be swapped for
 * test/support/aws/capacity.ts when that lands.
 */

/** An item as DynamoDB JSON (a stream image, a PutItem's Item). */
export type Image = Record<string, AttributeValue>;
type AttributeValue = {
  S?: string;
  N?: string;
  B?: string;
  BOOL?: boolean;
  NULL?: boolean;
  M?: Image;
  L?: AttributeValue[];
  SS?: string[];
  NS?: string[];
};

/** A global secondary index as the template declares it. */
export interface IndexShape {
  IndexName: string;
  KeySchema: Array<{ AttributeName: string; KeyType: string }>;
  Projection?: { ProjectionType?: string; NonKeyAttributes?: string[] };
}

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

function valueSize(value: AttributeValue): number {
  if (value.S !== undefined) return utf8(value.S);
  if (value.N !== undefined) {
    const digits = value.N.replace(/^[-+]/, '').replace('.', '').replace(/^0+/, '').replace(/0+$/, '') || '0';
    return Math.ceil(digits.length / 2) + 1;
  }
  if (value.B !== undefined) return Buffer.from(value.B, 'base64').length;
  if (value.BOOL !== undefined || value.NULL !== undefined) return 1;
  if (value.M) return 3 + Object.entries(value.M).reduce((sum, [name, v]) => sum + utf8(name) + valueSize(v) + 1, 0);
  if (value.L) return 3 + value.L.reduce((sum, v) => sum + valueSize(v) + 1, 0);
  if (value.SS) return value.SS.reduce((sum, s) => sum + utf8(s), 0);
  if (value.NS) return value.NS.reduce((sum, n) => sum + valueSize({ N: n }), 0);
  return 0;
}

/** An item's size in bytes. */
export function itemSize(item: Image): number {
  return Object.entries(item).reduce((sum, [name, value]) => sum + utf8(name) + valueSize(value), 0);
}

const kb = (bytes: number) => Math.max(1, Math.ceil(bytes / 1024));

/** The entry `index` holds for `item`, or undefined when the item lacks one of its keys (a sparse index). */
function indexEntry(item: Image | undefined, index: IndexShape, tableKeys: string[]): Image | undefined {
  if (!item) return undefined;
  const keys = index.KeySchema.map((key) => key.AttributeName);
  if (!keys.every((key) => item[key] !== undefined)) return undefined;
  const type = index.Projection?.ProjectionType ?? 'ALL';
  if (type === 'ALL') return item;
  const kept = new Set([...keys, ...tableKeys, ...(type === 'INCLUDE' ? (index.Projection?.NonKeyAttributes ?? []) : [])]);
  return Object.fromEntries(Object.entries(item).filter(([name]) => kept.has(name)));
}

const same = (a: Image | undefined, b: Image | undefined) => JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));
const sorted = (item: Image | undefined) => item && Object.fromEntries(Object.entries(item).sort(([a], [b]) => (a < b ? -1 : 1)));

/**
 * Write units of one applied write, from its stream images: `''` the table's, and each index's by name (absent when
 * the write cost that index nothing).
 */
export function streamWriteUnits(
  oldImage: Image | undefined,
  newImage: Image | undefined,
  indexes: IndexShape[],
  tableKeys = ['name'],
): Record<string, number> {
  const units: Record<string, number> = { '': kb(Math.max(oldImage ? itemSize(oldImage) : 0, newImage ? itemSize(newImage) : 0)) };
  for (const index of indexes) {
    const before = indexEntry(oldImage, index, tableKeys);
    const after = indexEntry(newImage, index, tableKeys);
    if (same(before, after)) continue;
    const keys = index.KeySchema.map((key) => key.AttributeName);
    const moved = before && after && keys.some((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
    let n = 0;
    if (before && (!after || moved)) n += kb(itemSize(before));
    if (after) n += kb(itemSize(after));
    units[index.IndexName] = n;
  }
  return units;
}
