/**
 * The AWS section's capacity figures (`npm run bench`, section `aws`): the
 * write units each applied change and each poll cost on the operations table
 * and its indexes, now and as the indexes were before (commit 1627b29:
 * `open-by-due` projecting everything, every operation in
 * `recent-by-recorded` under one partition value), priced by DynamoDB's rules
 * (test/support/aws/capacity.ts) from the items the engine really wrote on
 * moto; then the hottest partition's share under a uniform load of names and
 * the changes a second the stack holds before any partition passes 1,000
 * write units.
 *
 * BENCH_CAPACITY_JOBS (jobs per path, default 200).
 */
import { randomUUID } from 'node:crypto';
import { type AttributeValue, DescribeTableCommand, GetItemCommand } from '@aws-sdk/client-dynamodb';
import type { PollState } from '../app/ports.ts';
import { timeAfter } from '../core/time.ts';
import { createTableInput, openDynamoDb, operationsTable } from '../engines/dynamodb/index.ts';
import {
  AGE_INDEX,
  ageBucketOf,
  LIST_INDEX,
  LIST_INDEX_PARTITION,
  listShardOf,
  OPEN_INDEX,
  pollBucketOf,
} from '../engines/dynamodb/tables.ts';
import { CapacityCounter, type Image, shapeOf, type TableShape } from '../test/support/aws/capacity.ts';
import { startMoto } from '../test/support/aws/moto.ts';
import { ensureTable } from '../test/support/aws/tables.ts';

const JOBS = Number(process.env.BENCH_CAPACITY_JOBS ?? 200);
/** One partition's write throughput (DynamoDB's documented per-partition limit). */
const PARTITION_UNITS = 1_000;

type Path = 'running, then terminal' | 'terminal alone' | 'a poll that changes nothing';

const moto = await startMoto();
try {
  const table = `bench-capacity-${randomUUID()}`;
  const { operations: store, client } = openDynamoDb({ endpoint: moto.endpoint, tables: { operations: operationsTable(table) } });
  await ensureTable(client, createTableInput(table));
  const { Table } = await client.send(new DescribeTableCommand({ TableName: table }));
  const now = shapeOf(Table as NonNullable<typeof Table>);
  // The indexes as they were: open-by-due projecting everything, recent-by-recorded over every operation.
  const before: TableShape = {
    ...now,
    indexes: now.indexes.map((index) =>
      index.name === OPEN_INDEX || index.name === LIST_INDEX ? { ...index, projection: 'ALL' as const } : index,
    ),
  };
  const item = async (name: string): Promise<Image | undefined> =>
    (await client.send(new GetItemCommand({ TableName: table, Key: { name: { S: name } }, ConsistentRead: true }))).Item;
  // Every operation item carried listPartition then, and its index sorted on recordedAt.
  const asBefore = (image: Image | undefined): Image | undefined =>
    image && { ...image, [LIST_INDEX_PARTITION]: { S: 'operations' } as AttributeValue };

  const counters = { now: new Map<Path, CapacityCounter>(), before: new Map<Path, CapacityCounter>() };
  const changes = new Map<Path, number>();
  const write = async (path: Path, name: string, act: () => Promise<unknown>, applied = true) => {
    const old = await item(name);
    await act();
    const next = await item(name);
    for (const [which, shape, map] of [
      ['now', now, (i: Image | undefined) => i],
      ['before', before, asBefore],
    ] as const) {
      const counter = counters[which].get(path) ?? new CapacityCounter();
      counters[which].set(path, counter);
      counter.add(shape, map(old), map(next));
    }
    if (applied) changes.set(path, (changes.get(path) ?? 0) + 1);
  };
  const at = (minutes: number) => timeAfter('2026-12-01T00:00:00.000Z', minutes * 60_000);
  for (let i = 0; i < JOBS; i++) {
    const event = (name: string, state: 'RUNNING' | 'SUCCEEDED', minutes: number) =>
      ({ name, kind: 'batch', state, providerState: `JOB_STATE_${state}`, source: 'webhook', updateTime: at(minutes) }) as const;
    const running = `batches/capacity-${i}-${randomUUID()}`;
    await write('running, then terminal', running, () => store.apply(event(running, 'RUNNING', 1), at(1)));
    await write('running, then terminal', running, () => store.apply(event(running, 'SUCCEEDED', 2), at(2)));
    const terminal = `batches/capacity-${i}-${randomUUID()}`;
    await write('terminal alone', terminal, () => store.apply(event(terminal, 'SUCCEEDED', 2), at(2)));
    // A poll of an open job that finds nothing new: the worker's lease on the due time it was handed, then the
    // next due time (reconcile's schedulePoll); no applied change, so counted per poll.
    const polled = `batches/capacity-${i}-${randomUUID()}`;
    await store.apply(event(polled, 'RUNNING', 1), at(1));
    const due = (await item(polled))?.nextPollAt?.S as string;
    let version = 0;
    await write(
      'a poll that changes nothing',
      polled,
      async () => {
        const leased = await store.lease(polled, due, at(5));
        version = leased?.record.version ?? 0;
      },
      false,
    );
    const poll: Omit<PollState, 'nextPollAt'> & { nextPollAt: string } = {
      nextPollAt: at(10),
      unchangedPolls: 1,
      failedPolls: 0,
      notFoundPolls: 0,
    };
    await write('a poll that changes nothing', polled, () => store.schedulePoll(polled, version, poll));
  }

  console.log('\n## The AWS tables: write units and partitions (bench/aws-capacity.ts)\n');
  console.log(`${JOBS} jobs a path, written by the DynamoDB engine on moto, priced by DynamoDB's rules.`);
  console.log('| path (per applied change; a poll per poll) | before: table + indexes | now: table + indexes |');
  console.log('|---|---|---|');
  for (const [path, count] of changes) {
    const cells = (['before', 'now'] as const).map((which) => {
      const counter = counters[which].get(path) as CapacityCounter;
      const shape = which === 'now' ? now : before;
      const parts = [shape.name, ...shape.indexes.map((index) => `${shape.name}/${index.name}`)].map(
        (name) => counter.of(name).units / count,
      );
      const total = parts.reduce((a, b) => a + b, 0);
      return `${total.toFixed(2)} (${parts.map((units) => units.toFixed(2)).join(' + ')})`;
    });
    console.log(`| ${path} | ${cells[0]} | ${cells[1]} |`);
  }
  console.log(`(table + ${now.indexes.map((index) => index.name).join(' + ')})`);

  // The hottest partition under a uniform load: 100,000 names hashed as the stack hashes them.
  const names = Array.from({ length: 100_000 }, () => `batches/${randomUUID()}`);
  const share = (partitionOf: (name: string) => string) => {
    const counts = new Map<string, number>();
    for (const name of names) counts.set(partitionOf(name), (counts.get(partitionOf(name)) ?? 0) + 1);
    return Math.max(...counts.values()) / names.length;
  };
  const perChange = (index: string) => {
    const counter = counters.now.get('running, then terminal') as CapacityCounter;
    return counter.of(`${now.name}/${index}`).units / (changes.get('running, then terminal') as number);
  };
  const rows = [
    { what: `${OPEN_INDEX} (pollBucket)`, share: share(pollBucketOf), units: perChange(OPEN_INDEX) },
    { what: `${AGE_INDEX} (ageBucket)`, share: share((name) => ageBucketOf(name, 'batch')), units: perChange(AGE_INDEX) },
    // The list's read model: its latest item's index move, 2 units a change after the first listing (docs/design.md).
    { what: 'recent-operations (listShard, history table)', share: share(listShardOf), units: 1.5 },
    { what: `${LIST_INDEX} before (one partition value)`, share: 1, units: 1.5 },
  ];
  console.log(
    '\n| partition | hottest share, uniform names | units a change on it | changes a second before one partition passes 1,000 units |',
  );
  console.log('|---|---:|---:|---:|');
  for (const row of rows)
    console.log(
      `| ${row.what} | ${(row.share * 100).toFixed(1)}% | ${row.units.toFixed(2)} | ${Math.floor(PARTITION_UNITS / (row.units * row.share)).toLocaleString('en')} |`,
    );
  console.log("(the table itself: one partition an operation, no limit of the stack's)");
} finally {
  await moto.stop();
}
