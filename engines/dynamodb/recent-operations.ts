/**
 * `GET /operations` on DynamoDB: the history table's `recent-operations`
 * index (tables.ts) read newest first, its LIST_SHARDS partitions queried in
 * parallel and merged on `listSort`, so one opaque position pages through
 * every shard. What it yields are names in list order; the operation store
 * reads their current views and checks the filter again (the read model lags
 * the table by the history writer's delay).
 */
import { type DynamoDBDocumentClient, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { InvalidCursorError, type ListFilter } from '../../app/ports.ts';
import { PROVIDER_KINDS } from '../../core/lifecycle.ts';
import { listShards, OPEN_OVERDUE_ATTRIBUTE, RECENT_INDEX, RECENT_INDEX_PARTITION, RECENT_INDEX_SORT } from './tables.ts';

/** Rounds of shard queries one page may take when a filter skips most items (the old list's bound: 10 reads). */
export const MAX_LIST_ROUNDS = 10;
/**
 * Index items (about 150 bytes each) that fit the 4 KB a query is billed for
 * at least (half a read unit, eventually consistent): reading fewer costs the
 * same.
 */
const MINIMUM_BILLED_READ = 25;
/**
 * The most items a shard query reads when a filter skips most of them: 250 of
 * them are 5 read units, so a rare filter's page is whole in a round or two.
 */
const FILTERED_READ = 250;

interface Shard {
  partition: string;
  /** Matching items read and not yet handed out, newest first. */
  buffer: Array<{ name: string; sort: string }>;
  /** Where the next query starts; undefined before the first and once the shard is read to its end. */
  start?: Record<string, unknown>;
  /** Every item at or above this sort has been read (undefined: nothing read yet). */
  readDownTo?: string;
  done: boolean;
}

/** One page's merge of the shards, below `before` (the previous page's position). */
export class RecentOperations {
  private readonly shards: Shard[] = listShards().map((partition) => ({ partition, buffer: [], done: false }));
  private readonly filter: { expression?: string; names: Record<string, string>; values: Record<string, unknown> };
  private last?: string;
  /** Items the shard queries evaluated, and those of them the filter let through: what a filtered read expects. */
  private scanned = 0;
  private matched = 0;
  rounds = 0;

  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    listFilter: ListFilter,
    private readonly before?: string,
  ) {
    this.filter = indexFilter(listFilter);
  }

  /** Every shard read to its end and every item handed out. */
  get done(): boolean {
    return this.shards.every((shard) => shard.done && shard.buffer.length === 0);
  }

  /**
   * The next page's `before`: everything above it that matched has been
   * handed out. Undefined when nothing is left.
   */
  get position(): string | undefined {
    if (this.done) return undefined;
    const frontier = this.frontier();
    const head = this.head();
    // A matching item read but not handed out at or above the frontier: the page stopped at its limit.
    if (head && (frontier === undefined || head.item.sort >= frontier)) return this.last;
    return frontier;
  }

  /** Up to `count` names, newest first, reading the shards that hold the merge back (at most MAX_LIST_ROUNDS rounds in all). */
  async next(count: number): Promise<string[]> {
    const names: string[] = [];
    for (;;) {
      // An item can go out once no shard still unread above it could hold a newer one.
      for (let head = this.head(); names.length < count && head; head = this.head()) {
        const frontier = this.frontier();
        if (frontier !== undefined && head.item.sort < frontier) break;
        if (this.shards.some((shard) => !shard.done && shard.readDownTo === undefined)) break;
        head.shard.buffer.shift();
        names.push(head.item.name);
        this.last = head.item.sort;
      }
      if (names.length >= count || this.done || this.rounds >= MAX_LIST_ROUNDS) return names;
      const best = this.head()?.item.sort;
      const wanted = count - names.length;
      const open = this.shards.filter((shard) => !shard.done);
      // Twice a shard's share of what is still wanted, and two more.
      const shareOf = (shards: number) => Math.ceil((2 * wanted) / shards) + 2;
      const fair = shareOf(open.length);
      // The shards that hold the merge back; filtered, also those holding less than their share of matching items,
      // which a rare filter's next round would be waiting on one by one.
      const reading = open.filter(
        (shard) =>
          shard.readDownTo === undefined ||
          best === undefined ||
          shard.readDownTo > best ||
          (this.filter.expression !== undefined && shard.buffer.length < fair),
      );
      this.rounds++;
      // Each reads twice its share of what is still wanted (and two more): over uniformly hashed names a page is whole
      // in a round or two, where a page's worth from each would read LIST_SHARDS times too much. A shard that holds
      // more than its share is read again in the next round.
      const share = shareOf(reading.length);
      const limit = this.filter.expression ? this.filteredRead(share) : Math.min(wanted, share);
      await Promise.all(reading.map((shard) => this.read(shard, limit)));
    }
  }

  /**
   * What a shard reads for `share` matching items: its share over the part of
   * what was read so far that the filter let through (all of it before the
   * first read), at least what a query is billed for anyway, at most
   * FILTERED_READ. A common filter's page costs what an unfiltered one does; a
   * rare one's reads grow to FILTERED_READ from its second round.
   */
  private filteredRead(share: number): number {
    const rate = this.scanned === 0 ? 1 : Math.max(this.matched, 1) / this.scanned;
    return Math.min(FILTERED_READ, Math.max(MINIMUM_BILLED_READ, Math.ceil(share / rate)));
  }

  private async read(shard: Shard, limit: number): Promise<void> {
    const names: Record<string, string> = { '#shard': RECENT_INDEX_PARTITION, ...this.filter.names };
    const values: Record<string, unknown> = { ':shard': shard.partition, ...this.filter.values };
    let condition = '#shard = :shard';
    if (this.before !== undefined) {
      condition += ' AND #sort < :before';
      names['#sort'] = RECENT_INDEX_SORT;
      values[':before'] = this.before;
    }
    const {
      Items = [],
      LastEvaluatedKey,
      ScannedCount,
    } = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        IndexName: RECENT_INDEX,
        KeyConditionExpression: condition,
        ...(this.filter.expression && { FilterExpression: this.filter.expression }),
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ScanIndexForward: false,
        Limit: limit,
        ...(shard.start && { ExclusiveStartKey: shard.start }),
      }),
    );
    this.scanned += ScannedCount ?? Items.length;
    this.matched += Items.length;
    shard.buffer.push(...Items.map((item) => ({ name: item.name as string, sort: item[RECENT_INDEX_SORT] as string })));
    shard.start = LastEvaluatedKey;
    shard.done = LastEvaluatedKey === undefined;
    shard.readDownTo = LastEvaluatedKey ? (LastEvaluatedKey[RECENT_INDEX_SORT] as string) : '';
  }

  /** The newest item read and not handed out, and its shard. */
  private head(): { shard: Shard; item: { name: string; sort: string } } | undefined {
    let best: { shard: Shard; item: { name: string; sort: string } } | undefined;
    for (const shard of this.shards) {
      const item = shard.buffer[0];
      if (item && (!best || item.sort > best.item.sort)) best = { shard, item };
    }
    return best;
  }

  /** The highest point some shard not read to its end has been read down to: below it the merge does not know every item yet. */
  private frontier(): string | undefined {
    let frontier: string | undefined;
    for (const shard of this.shards)
      if (!shard.done && shard.readDownTo !== undefined && (frontier === undefined || shard.readDownTo > frontier))
        frontier = shard.readDownTo;
    return frontier;
  }
}

/** The filter on what the index projects (tables.ts, RECENT_INDEX_PROJECTION). */
function indexFilter(filter: ListFilter): { expression?: string; names: Record<string, string>; values: Record<string, unknown> } {
  const conditions: string[] = [];
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  if (filter.state) {
    conditions.push('#state = :state');
    names['#state'] = 'state';
    values[':state'] = filter.state;
  }
  if (filter.kind) {
    conditions.push('#kind = :kind');
    names['#kind'] = 'kind';
    values[':kind'] = filter.kind;
  }
  if (filter.provider) {
    const kinds = PROVIDER_KINDS[filter.provider].map((kind, i) => {
      values[`:provider${i}`] = kind;
      return `:provider${i}`;
    });
    conditions.push(`#kind IN (${kinds.join(', ')})`);
    names['#kind'] = 'kind';
  }
  if (filter.overdue) {
    conditions.push('attribute_exists(#overdue)');
    names['#overdue'] = OPEN_OVERDUE_ATTRIBUTE;
  }
  return { ...(conditions.length > 0 && { expression: conditions.join(' AND ') }), names, values };
}

/** A page's position as the cursor handed out: opaque, base64url. */
export function cursorOf(position: string): string {
  return Buffer.from(JSON.stringify({ before: position })).toString('base64url');
}

/** A cursor back to its position; anything this list did not hand out is refused before DynamoDB sees it. */
export function positionOf(cursor: string): string {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString());
  } catch {
    throw new InvalidCursorError('cursor is not one this API handed out');
  }
  const before = (value as { before?: unknown } | null)?.before;
  const valid =
    typeof value === 'object' && value !== null && Object.keys(value).length === 1 && typeof before === 'string' && before.includes('#');
  if (!valid) throw new InvalidCursorError('cursor is not one this API handed out');
  return before as string;
}
