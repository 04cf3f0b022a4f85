/**
 * `npm run bench`: side-by-side measurements in one run, reported as ratios
 * (these machines are shared and noisy; absolute numbers drift between runs).
 *
 *  1. correctness overhead: Ratchet's ingest (consistent read + conditional
 *     write) vs a naive receiver's unconditional PutItem, same events;
 *  2. contention: concurrent ingesters on one hot operation vs spread out;
 *  3. the HTTP edge: signed webhooks through the local runtime vs ingest
 *     called in-process.
 */
// Set before anything logs: the bench prints its own table only.
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { randomUUID } from 'node:crypto';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { loadConfig } from '../lambda/config.ts';
import type { OperationEvent } from '../lambda/core/reducer.ts';
import { ingest } from '../lambda/ingest.ts';
import { createDocumentClient, createDynamoDbClient } from '../lambda/store/dynamodb.ts';
import { DynamoDbOperationStore } from '../lambda/store/dynamodb-operation-store.ts';
import { startDynamoDbLocal } from '../local/dynamodb-local.ts';
import { startLocalRuntime } from '../local/runtime.ts';
import { newSecret, signedDelivery } from '../test/support/deliveries.ts';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 600);
/** Rows run interleaved this many times; each row reports its median, which rides out the machine's noise. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 8;
const TABLE = 'ratchet-bench';

const db = await startDynamoDbLocal();
const secret = newSecret();
const runtime = await startLocalRuntime(
  loadConfig({ DYNAMODB_ENDPOINT: db.endpoint, TABLE_NAME: TABLE, WEBHOOK_SIGNING_SECRETS: secret, PORT: '0' }),
);
const client = createDynamoDbClient({ endpoint: db.endpoint });
const doc = createDocumentClient(client);
const store = new DynamoDbOperationStore(doc, TABLE);

/** Events of `operations` operations, each moving forward in time, interleaved. */
function events(operations: number, prefix: string): OperationEvent[] {
  return Array.from({ length: EVENTS }, (_, i) => ({
    name: `batches/${prefix}-${i % operations}`,
    kind: 'batch',
    state: 'RUNNING',
    providerState: 'JOB_STATE_RUNNING',
    updateTime: `2026-11-30T10:00:00.${String(i).padStart(9, '0')}Z`,
    source: 'poll',
  }));
}

async function timed(
  label: string,
  work: OperationEvent[],
  each: (e: OperationEvent) => Promise<unknown>,
): Promise<{ label: string; perSecond: number }> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < work.length) await each(work[next++] as OperationEvent);
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { label, perSecond: work.length / seconds };
}

let lostRaces = 0;
const ingestOne = async (e: OperationEvent) => {
  const result = await ingest(e, { store });
  lostRaces += result.attempts - 1;
};

// Warm up the JIT, the connection pool and DynamoDB Local.
await timed('warm-up', events(64, `warm-${randomUUID()}`).slice(0, 300), ingestOne);

const webhookOne = async (e: OperationEvent) => {
  const { body, headers } = signedDelivery(secret, {
    type: 'batch.succeeded',
    version: 'v1',
    timestamp: e.updateTime,
    data: { id: e.name },
  });
  const response = await fetch(`${runtime.url}/webhooks/gemini`, { method: 'POST', body, headers });
  if (response.status !== 200) throw new Error(`webhook answered ${response.status}`);
  await response.arrayBuffer();
};
const plan: Array<[string, number, (e: OperationEvent) => Promise<unknown>]> = [
  ['naive PutItem', 64, (e) => doc.send(new PutCommand({ TableName: TABLE, Item: e }))],
  ['ingest, 64 operations', 64, ingestOne],
  ['ingest, 1 hot operation', 1, ingestOne],
  ['HTTP webhook, 64 operations', 64, webhookOne],
];
const samples = new Map<string, number[]>();
const races = new Map<string, number>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [label, operations, each] of plan) {
    lostRaces = 0;
    const { perSecond } = await timed(label, events(operations, `${label.replace(/\W+/g, '-')}-${randomUUID()}`), each);
    samples.set(label, [...(samples.get(label) ?? []), perSecond]);
    races.set(label, (races.get(label) ?? 0) + lostRaces);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
const rows = plan.map(([label]) => ({ label, perSecond: median(samples.get(label) ?? []) }));
const spread = rows[1] as { perSecond: number };
const spreadRaces = races.get('ingest, 64 operations') ?? 0;
const hotRaces = races.get('ingest, 1 hot operation') ?? 0;
console.log(
  `\n${EVENTS} events per row and round, ${ROUNDS} interleaved rounds (medians), ${CONCURRENCY} concurrent callers, DynamoDB Local, Node ${process.version}\n`,
);
console.log('| path | events/s | relative to ingest (64 operations) |');
console.log('|---|---:|---:|');
for (const row of rows) console.log(`| ${row.label} | ${row.perSecond.toFixed(0)} | ${(row.perSecond / spread.perSecond).toFixed(2)} |`);
console.log(
  `\nlost conditional-write races: ${spreadRaces} spread, ${hotRaces} on the hot operation (each one re-reduced against the winner, no extra read)`,
);

client.destroy();
await runtime.stop();
await db.stop();
