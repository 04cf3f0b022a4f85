/**
 * No partition that every operation shares, and what the webhook's write
 * path costs, counted from the keys actually written: thousands of
 * operations through the synthesized stack's API function on moto
 * (stack-on-moto.ts, the history mapping running), in a mix of paths
 * (tracked then a terminal webhook; tracked, a webhook that leaves it
 * running, then a terminal one; a terminal webhook alone; other providers'
 * jobs tracked and left open). Every write's stream record (the history
 * table's stream switched on here, for counting) is priced by
 * test/support/aws/capacity.ts: the hottest partition of each table and
 * index, the write units per applied change on the operations table and
 * its indexes per path; then GET /operations pages through all of them,
 * newest first, across the list's shards, with each filter.
 *
 * One pass only (not on Node 24): it measures DynamoDB's keys, which do not
 * depend on the Node version, and takes about a minute of moto's time.
 */
import { DescribeTableCommand, DynamoDBClient, ScanCommand, UpdateTableCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { OperationKind, OperationState } from '../../core/lifecycle.ts';
import { DEFAULT_OVERDUE_AFTER, overdueMark } from '../../core/overdue.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { CapacityCounter, hottest, type Image, shapeOf, type TableShape } from '../support/aws/capacity.ts';
import { MOTO_CREDENTIALS, MOTO_REGION } from '../support/aws/moto.ts';
import { StackOnMoto } from '../support/aws/stack-on-moto.ts';
import { type Synthesized, synthesizeWithBundles } from '../support/aws/synth.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { eventually } from '../support/receiver.ts';
import { readStream } from '../support/stream-records.ts';

/** Operations written: as many as fit in WRITING_MS, at least MINIMUM. */
const MINIMUM = 2_000;
const WRITING_MS = 40_000;
const AT_ONCE = 8;

/** What happens to an operation, in order, and the list filters it should match at the end. */
type Path = 'tracked-terminal' | 'tracked-running-terminal' | 'webhook-terminal' | 'tracked-open' | 'tracked-running-open';
interface Operation {
  name: string;
  kind: OperationKind;
  path: Path;
  state: OperationState | null;
  overdue?: boolean;
}

/** Of each 20: 10 Gemini batches tracked then ended, 4 interactions tracked, waiting, then ended, 2 batches ended untracked, 3 other providers' jobs tracked, 1 interaction left waiting. */
function planOf(i: number, run: string): Operation {
  const slot = i % 20;
  const id = `${run}-${i}`;
  if (slot < 10)
    return { name: `batches/p-${id}`, kind: 'batch', path: 'tracked-terminal', state: slot % 5 === 0 ? 'FAILED' : 'SUCCEEDED' };
  if (slot < 14) return { name: `interactions/p-${id}`, kind: 'interaction', path: 'tracked-running-terminal', state: 'SUCCEEDED' };
  if (slot < 16) return { name: `batches/q-${id}`, kind: 'batch', path: 'webhook-terminal', state: 'SUCCEEDED' };
  if (slot === 16) return { name: `openai/batches/batch_${id}`, kind: 'openai-batch', path: 'tracked-open', state: null };
  if (slot === 17) return { name: `openai/responses/resp_${id}`, kind: 'openai-response', path: 'tracked-open', state: null };
  if (slot === 18) return { name: `anthropic/messages/batches/msgbatch_${id}`, kind: 'anthropic-batch', path: 'tracked-open', state: null };
  return { name: `interactions/o-${id}`, kind: 'interaction', path: 'tracked-running-open', state: 'REQUIRES_ACTION' };
}

const secret = newSecret();
let synthesized: Synthesized;
let stack: StackOnMoto;
let dynamodb: DynamoDBClient;
let tables: { operations: TableShape; history: TableShape };
const operations: Operation[] = [];
let clock = Date.now();

async function request(method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<Response> {
  const response = await fetch(`${stack.apiUrl}${path}`, { method, body, headers });
  if (response.status >= 300) throw new Error(`${method} ${path}: ${response.status} ${await response.text()}`);
  return response;
}

async function deliver(type: string, name: string): Promise<void> {
  clock += 1;
  const { body, headers } = signedDelivery(secret, envelope(type, { id: name }, new Date(clock).toISOString()));
  await request('POST', '/webhooks/gemini', body, headers);
}

async function write(operation: Operation): Promise<void> {
  const track = () => request('POST', '/operations', JSON.stringify({ name: operation.name }), { 'content-type': 'application/json' });
  const end = operation.kind === 'batch' ? (operation.state === 'FAILED' ? 'batch.failed' : 'batch.succeeded') : 'interaction.completed';
  if (operation.path !== 'webhook-terminal') await track();
  if (operation.path.includes('running')) await deliver('interaction.requires_action', operation.name);
  if (operation.path.endsWith('terminal')) await deliver(end, operation.name);
}

beforeAll(async () => {
  synthesized = synthesizeWithBundles();
  const endpoint = inject('dynamodbEndpoint');
  stack = await new StackOnMoto(synthesized, endpoint, {
    secrets: { WebhookSigningSecrets: secret },
    // No reconcile run in this test: its polls are not the webhook's path.
    reconcileEveryMs: 3_600_000,
    // The effects Pipe and function write nothing of the operations or history tables: left out, to save moto's time.
    effects: false,
  }).start();
  dynamodb = new DynamoDBClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  const describeTable = async (prefix: string) =>
    (await dynamodb.send(new DescribeTableCommand({ TableName: tableName(prefix) }))).Table ?? {};
  // The history table has no stream in the stack; here one counts what the history writer writes.
  await dynamodb.send(
    new UpdateTableCommand({
      TableName: tableName('History'),
      StreamSpecification: { StreamEnabled: true, StreamViewType: 'NEW_AND_OLD_IMAGES' },
    }),
  );
  tables = { operations: shapeOf(await describeTable('Operations')), history: shapeOf(await describeTable('History')) };
}, 180_000);

afterAll(async () => {
  await stack?.stop();
  dynamodb?.destroy();
  synthesized?.remove();
}, 120_000);

function tableName(prefix: string): string {
  return String(stack.world.resolve({ Ref: stack.world.logicalId('AWS::DynamoDB::Table', prefix) }));
}

describe.skipIf(process.version.startsWith('v24.'))('the AWS tables under thousands of operations', () => {
  it('are written through the API, then held by the list once each', async () => {
    const run = Date.now().toString(36);
    const started = Date.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: AT_ONCE }, async () => {
        while (next < MINIMUM || Date.now() - started < WRITING_MS) {
          const operation = planOf(next++, run);
          await write(operation);
          operations.push(operation);
        }
      }),
    );
    // Some open, observed jobs marked overdue, as reconcile marks them (the same store write).
    const { operations: store, destroy } = openDynamoDb({
      endpoint: inject('dynamodbEndpoint'),
      tables: { operations: operationsTable(tableName('Operations')) },
    });
    const later = new Date(Date.now() + 3 * 3_600_000).toISOString();
    for (const operation of operations.filter((o) => o.path === 'tracked-running-open').slice(0, 40)) {
      const record = await store.get(operation.name);
      const mark = record && overdueMark(record, DEFAULT_OVERDUE_AFTER, later);
      expect(mark && (await store.write(mark, record.version)).ok).toBe(true);
      operation.overdue = true;
    }
    destroy();
    console.log(`${operations.length} operations written through the API in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(operations.length).toBeGreaterThanOrEqual(MINIMUM);
  }, 400_000);

  it('leave no partition of the tables or their indexes more than 1/10 of its writes; the webhook path costs at most 2 write units per applied change where no webhook leaves a job running', async () => {
    const writes = (await readStream(dynamodb, inject('dynamodbEndpoint'), tableName('Operations'))).filter(
      (record) => (record.dynamodb?.NewImage as Image | undefined)?.source?.S !== 'overdue',
    );
    // The history writer runs behind: wait until it has every operation's latest item (its index counted), then read what it wrote.
    const listed = async () =>
      (await dynamodb.send(new ScanCommand({ TableName: tableName('History'), IndexName: 'recent-operations', Select: 'COUNT' }))).Count ??
      0;
    await eventually(async () => (await listed()) >= operations.length, 240_000, 'the history writer');
    const history = await readStream(dynamodb, inject('dynamodbEndpoint'), tableName('History'));
    // One API environment writes the operations table one request at a time, so moto's stream holds each write once
    // (concurrent writes can share a sequence number there, and a reader then misses or repeats records).
    expect(new Set(writes.map((record) => record.dynamodb?.Keys?.name?.S)).size).toBe(operations.length);
    const all = new CapacityCounter();
    const byPath = new Map<Path, { counter: CapacityCounter; changes: number }>();
    const pathOf = new Map(operations.map((operation) => [operation.name, operation.path]));
    for (const record of writes) {
      all.addRecord(tables.operations, record as never);
      const path = pathOf.get(record.dynamodb?.Keys?.name?.S as string) as Path;
      const entry = byPath.get(path) ?? { counter: new CapacityCounter(), changes: 0 };
      entry.counter.addRecord(tables.operations, record as never);
      entry.changes++;
      byPath.set(path, entry);
    }
    for (const record of history) all.addRecord(tables.history, record as never);

    const lines: string[] = [];
    for (const table of [tables.operations, tables.history])
      for (const name of [table.name, ...table.indexes.map((index) => `${table.name}/${index.name}`)]) {
        const tally = all.of(name);
        const top = hottest(tally);
        lines.push(
          `${name.replace(/^.*?-(Operations|History)[^/]*/, '$1')}: ${tally.units} units in ${tally.writes} writes, ${tally.partitions.size} partitions, the hottest ${(top.share * 100).toFixed(1)}%`,
        );
        expect(top.share, `${name}'s hottest partition`).toBeLessThanOrEqual(0.1);
      }
    const perChange = (counter: CapacityCounter, changes: number) => {
      const units = [tables.operations.name, ...tables.operations.indexes.map((index) => `${tables.operations.name}/${index.name}`)].map(
        (name) => counter.of(name).units,
      );
      return { units: units.reduce((a, b) => a + b, 0) / changes, byIndex: units.map((u) => (u / changes).toFixed(2)).join(' + ') };
    };
    for (const [path, { counter, changes }] of byPath) {
      const { units, byIndex } = perChange(counter, changes);
      lines.push(
        `${path}: ${units.toFixed(2)} units per applied change (table + ${tables.operations.indexes.map((i) => i.name).join(' + ')}: ${byIndex})`,
      );
    }
    const overall = perChange(all, writes.length);
    // The history writer writes a batch's records at once: moto's count of them may miss or repeat a few (above), so
    // its figure is printed, and only its partitions' shares are held to a bound.
    lines.push(
      `all: ${overall.units.toFixed(2)} units per applied change (${overall.byIndex}); history table and its index beside it: ${((all.of(tables.history.name).units + all.of(`${tables.history.name}/recent-operations`).units) / writes.length).toFixed(2)}`,
    );
    console.log(lines.join('\n'));

    // Each path's cost, from DynamoDB's rules by hand: a write of an item under 1 KB is 1 unit on the table; open-by-due-v2
    // (kind and credential projected, neither ever changing) takes the job in at its first write and lets it go at its
    // end; open-by-age (keys only) takes an observed open job and lets it go at its end; recent-by-recorded holds none.
    const expected: Record<Path, number> = {
      'tracked-terminal': (2 + 2) / 2,
      'webhook-terminal': 1,
      'tracked-open': 2,
      'tracked-running-open': (2 + 2) / 2,
      'tracked-running-terminal': (2 + 2 + 3) / 3,
    };
    for (const [path, { counter, changes }] of byPath)
      expect({ path, units: perChange(counter, changes).units }).toEqual({ path, units: expected[path] });
    // At most 2 wherever a webhook ends the job (every Gemini batch event, every OpenAI, Anthropic and Bedrock event) or leaves it open; 7/3 where a webhook leaves a job running and another ends it.
    for (const path of ['tracked-terminal', 'webhook-terminal', 'tracked-open', 'tracked-running-open'] as const)
      expect(expected[path]).toBeLessThanOrEqual(2);
    expect(all.of(`${tables.operations.name}/recent-by-recorded`).units).toBe(0);
  }, 300_000);

  it('GET /operations pages through every operation once, newest first, across the shards, with limit and each filter', async () => {
    const page = async (query: string) =>
      (await (await request('GET', `/operations?${query}`)).json()) as {
        operations: Array<{ name: string; recordedAt: string; state: string | null; kind: string; overdue?: unknown }>;
        nextCursor?: string;
      };
    const all = async (query: string, limit: number) => {
      const seen: Awaited<ReturnType<typeof page>>['operations'] = [];
      let cursor: string | undefined;
      do {
        const answer = await page(`${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
        expect(answer.operations.length).toBeLessThanOrEqual(limit);
        seen.push(...answer.operations);
        cursor = answer.nextCursor;
      } while (cursor);
      return seen;
    };
    const ours = new Set(operations.map((o) => o.name));
    const mine = (names: string[]) => names.filter((name) => ours.has(name));
    const listed = await all('', 100);
    const names = mine(listed.map((o) => o.name));
    expect(names.length).toBe(operations.length);
    expect(new Set(names).size).toBe(operations.length);
    // Newest first: recordedAt never rises down the list.
    const times = listed.map((o) => o.recordedAt);
    expect(times).toEqual([...times].sort().reverse());
    const expectFilter = async (query: string, wanted: (o: Operation) => boolean, limit = 100) => {
      const got = mine((await all(query, limit)).map((o) => o.name));
      const expected = operations.filter(wanted).map((o) => o.name);
      expect({ query, count: got.length, once: new Set(got).size }).toEqual({ query, count: expected.length, once: expected.length });
      expect({ query, got: [...got].sort() }).toEqual({ query, got: expected.sort() });
    };
    // A small limit pages the same way (on a kind of 100 jobs: 5 pages).
    await expectFilter('kind=anthropic-batch', (o) => o.kind === 'anthropic-batch', 20);
    await expectFilter('state=FAILED', (o) => o.state === 'FAILED');
    await expectFilter('state=REQUIRES_ACTION', (o) => o.state === 'REQUIRES_ACTION');
    await expectFilter('kind=interaction', (o) => o.kind === 'interaction');
    await expectFilter('provider=openai', (o) => o.kind.startsWith('openai-'));
    await expectFilter('overdue=true', (o) => o.overdue === true);
  }, 300_000);
});
