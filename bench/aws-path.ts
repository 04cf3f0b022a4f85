/**
 * The AWS path's part of `npm run bench`: the API as its Lambda composes it
 * (the HTTP app over the DynamoDB store), served over HTTP, against the seed
 * article's receiver (bench/seed-baseline.ts) on DynamoDB, side by side in
 * one run, interleaved rounds, same moto, same signed deliveries
 * over HTTP, for the three mixes of bench/mixes.ts. DynamoDB
 * requests are counted by a proxy (test/support/aws/recording-proxy.ts). Then each Lambda
 * bundle's size and cold start (bench/cold-start.ts), optionally beside another
 * git ref's (BENCH_COMPARE_REF). Everything is reported as ratios: these
 * machines are shared and noisy.
 *
 * BENCH_SIZE (deliveries per mix, default 500), BENCH_ROUNDS (3),
 * BENCH_COLD_RUNS (5; 0 skips bundles), BENCH_COMPARE_REF (unset),
 * BENCH_DYNAMODB_LATENCY_MS (0: moto as it is; e.g. 4 models the
 * network round trip to DynamoDB, which moto on loopback does not have).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CreateQueueCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { serve } from '@hono/node-server';
import { createApp } from '../app/http/app.ts';
import { WebhookSignatureVerifier } from '../app/http/webhook-signature.ts';
import { trackedRecord } from '../core/reducer.ts';
import { normalizeTime } from '../core/time.ts';
import {
  compileWrite,
  createTableInput,
  deadLetterTableInput,
  keyedTableInput,
  openDynamoDb,
  operationsTable,
} from '../engines/dynamodb/index.ts';
import { httpApiEvent } from '../test/support/api-gateway.ts';
import { startMoto } from '../test/support/aws/moto.ts';
import { RecordingProxy } from '../test/support/aws/recording-proxy.ts';
import { ensureTable } from '../test/support/aws/tables.ts';
import { envelope, newSecret, signedDelivery } from '../test/support/deliveries.ts';
import { FakeGemini } from '../test/support/fake-gemini.ts';
import { Receiver } from '../test/support/receiver.ts';
import { silentLogger } from '../test/support/silent-logger.ts';
import { type Bundles, buildBundles, buildBundlesAt, coldStart, FUNCTIONS, type FunctionName, LAMBDA_NODE } from './cold-start.ts';
import { type Mix, mixes, percentile, playMix } from './mixes.ts';
import { DynamoDbSeedStore, SeedBaseline } from './seed-baseline.ts';

const SIZE = Number(process.env.BENCH_SIZE ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const COLD_RUNS = Number(process.env.BENCH_COLD_RUNS ?? 5);
const COMPARE_REF = process.env.BENCH_COMPARE_REF;
/** Added to every DynamoDB request: 0 measures moto as it is; a few ms model DynamoDB's round trip. */
const LATENCY_MS = Number(process.env.BENCH_DYNAMODB_LATENCY_MS ?? 0);
const ROOT = resolve(import.meta.dirname, '..');
const TABLES = { ratchet: 'bench-ratchet', seed: 'bench-seed' } as const;
type System = keyof typeof TABLES;

const db = await startMoto();
// Ctrl-C: no moto_server left behind.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void db.stop().finally(() => process.exit(130)));
const proxy = await new RecordingProxy(db.endpoint, LATENCY_MS).start();
const secret = newSecret();
const direct = openDynamoDb({ endpoint: db.endpoint, tables: {} });
// Through the proxy, which counts the requests: the API's store and the seed's.
const proxied = openDynamoDb({ endpoint: proxy.endpoint, tables: { operations: operationsTable(TABLES.ratchet) } });
for (const table of Object.values(TABLES)) await ensureTable(direct.client, createTableInput(table));
const checks = direct.documents;
// The API as its Lambda composes it (lambda/handlers/api.ts): the HTTP app over the DynamoDB store.
const api = createApp({
  store: proxied.operations,
  verifier: new WebhookSignatureVerifier(async () => [secret]),
  logger: silentLogger,
});
const server = await new Promise<ReturnType<typeof serve>>((resolveServer) => {
  const listening = serve({ fetch: api.fetch, hostname: '127.0.0.1', port: 0 }, () => resolveServer(listening));
});
const apiUrl = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
const seed = await new SeedBaseline(new DynamoDbSeedStore(proxied.documents, TABLES.seed), secret).start();
const urls: Record<System, string> = { ratchet: `${apiUrl}/webhooks/gemini`, seed: seed.url };

interface Sample {
  requestsPerEvent: number;
  perSecond: number;
  p50: number;
  p99: number;
  lost: number;
  wrongFinal: number;
}

async function play(system: System, mix: Mix): Promise<Sample> {
  proxy.reset();
  const lostBefore = seed.lost;
  const played = await playMix(urls[system], secret, mix);
  return {
    requestsPerEvent: proxy.requests(TABLES[system]) / mix.deliveries.length,
    perSecond: played.perSecond,
    p50: played.p50,
    p99: played.p99,
    lost: system === 'seed' ? seed.lost - lostBefore : played.notRecorded,
    wrongFinal: await wrongFinalStates(system, mix),
  };
}

/** Operations whose stored state or time is not the last one sent (read directly, uncounted). */
async function wrongFinalStates(system: System, mix: Mix): Promise<number> {
  const last = new Map<string, { state: string; time: string }>();
  for (const delivery of mix.deliveries) {
    const { type, data } = JSON.parse(delivery.body) as { type: string; data: { id: string; update_time?: string } };
    const state = type.endsWith('succeeded') || type.endsWith('completed') ? 'SUCCEEDED' : 'REQUIRES_ACTION';
    const time = data.update_time ?? '';
    const known = last.get(data.id);
    const terminal = known?.state === 'SUCCEEDED';
    if (!known || (!terminal && (state === 'SUCCEEDED' || time > known.time))) last.set(data.id, { state, time });
  }
  let wrong = 0;
  for (const [name, expected] of last) {
    const { Item } = await checks.send(new GetCommand({ TableName: TABLES[system], Key: { name }, ConsistentRead: true }));
    const time = system === 'ratchet' ? expected.time && normalizeTime(expected.time) : expected.time;
    if (Item?.state !== expected.state || (expected.state !== 'SUCCEEDED' && Item?.updateTime !== time)) wrong++;
  }
  return wrong;
}

// Warm up both paths with every mix.
for (let i = 0; i < 2; i++)
  for (const system of ['ratchet', 'seed'] as const) for (const mix of mixes(`warm-${system}-${i}`, SIZE)) await play(system, mix);

const samples = new Map<string, Sample[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, label] of mixes('labels', 10)
    .map((m) => m.label)
    .entries()) {
    // Each mix back to back on both systems, who goes first alternating.
    const order: System[] = (round + i) % 2 === 0 ? ['seed', 'ratchet'] : ['ratchet', 'seed'];
    for (const system of order) {
      const mix = mixes(`${system}-${round}`, SIZE).find((m) => m.label === label) as Mix;
      const key = `${label}|${system}`;
      samples.set(key, [...(samples.get(key) ?? []), await play(system, mix)]);
    }
  }
}
const median = (xs: number[]) => percentile(xs, 0.5);
const of = (label: string, system: System, field: keyof Sample) => median((samples.get(`${label}|${system}`) ?? []).map((s) => s[field]));
const sum = (label: string, system: System, field: keyof Sample) =>
  (samples.get(`${label}|${system}`) ?? []).reduce((n, s) => n + s[field], 0);

console.log(`\n## The AWS path: the API's ingest vs the seed receiver, both on DynamoDB\n`);
console.log(
  `${SIZE} deliveries per mix, ${ROUNDS} interleaved rounds (medians), signed webhooks over HTTP, moto${LATENCY_MS ? ` + ${LATENCY_MS} ms per request` : ''}, Node ${process.version}\n`,
);
console.log(
  '| mix | DynamoDB requests per delivery, seed → Ratchet | throughput ×seed | p50 latency ×seed | p99 latency ×seed | lost (seed / Ratchet 503) | wrong final state (seed / Ratchet) |',
);
console.log('|---|---:|---:|---:|---:|---:|---:|');
for (const { label } of mixes('labels', 10)) {
  const ratio = (field: keyof Sample) => (of(label, 'ratchet', field) / of(label, 'seed', field)).toFixed(2);
  console.log(
    `| ${label} | ${of(label, 'seed', 'requestsPerEvent').toFixed(2)} → ${of(label, 'ratchet', 'requestsPerEvent').toFixed(2)} | ${ratio('perSecond')} | ${ratio('p50')} | ${ratio('p99')} | ${sum(label, 'seed', 'lost')} / ${sum(label, 'ratchet', 'lost')} | ${sum(label, 'seed', 'wrongFinal')} / ${sum(label, 'ratchet', 'wrongFinal')} |`,
  );
}

// Write cost of Ratchet's indexes: capacity units DynamoDB (Local) reports per applied write.
const costTable = 'bench-cost';
await ensureTable(direct.client, createTableInput(costTable));
const cost = { table: 0, 'open-by-due': 0, 'recent-by-recorded': 0, writes: 0, reported: 0 };
for (let i = 0; i < 50; i++) {
  for (const [state, time] of [
    ['RUNNING', '10:00:00'],
    ['SUCCEEDED', '10:05:00'],
  ] as const) {
    const event = {
      name: `batches/cost-${i}`,
      kind: 'batch',
      state,
      providerState: state,
      source: 'webhook',
      updateTime: `2026-11-30T${time}.000000000Z`,
    } as const;
    const write = compileWrite(event, '2026-12-01T00:00:00.000000000Z', 'change');
    const { ConsumedCapacity } = await checks.send(
      new UpdateCommand({ TableName: costTable, Key: { name: event.name }, ...write, ReturnConsumedCapacity: 'INDEXES' }),
    );
    if (ConsumedCapacity) cost.reported++;
    cost.table += ConsumedCapacity?.Table?.CapacityUnits ?? 0;
    for (const index of ['open-by-due', 'recent-by-recorded'] as const)
      cost[index] += ConsumedCapacity?.GlobalSecondaryIndexes?.[index]?.CapacityUnits ?? 0;
    cost.writes++;
  }
}
console.log(
  cost.reported === 0
    ? '\nWrite capacity per applied write: not measured (moto answers UpdateItem without ConsumedCapacity; see docs/benchmarks.md for the figures DynamoDB Local reported)'
    : `\nWrite capacity per applied write (a first RUNNING, then SUCCEEDED; as the server reports it): table ${(cost.table / cost.writes).toFixed(2)}, open-by-due ${(cost['open-by-due'] / cost.writes).toFixed(2)}, recent-by-recorded (GET /operations) ${(cost['recent-by-recorded'] / cost.writes).toFixed(2)}`,
);

(server as import('node:http').Server).closeAllConnections();
await new Promise((resolve) => server.close(resolve));
await seed.stop();
proxied.destroy();

// Bundles and cold starts.
if (COLD_RUNS === 0) {
  direct.destroy();
  await db.stop();
  process.exit(0);
}
const outdir = mkdtempSync(join(tmpdir(), 'ratchet-bench-bundles-'));
const gemini = await new FakeGemini('bench-key').start();
const receiver = await new Receiver(secret).start();
const coldTable = 'bench-cold';
await ensureTable(direct.client, createTableInput(coldTable));
await ensureTable(direct.client, keyedTableInput(`${coldTable}-ledger`));
await ensureTable(direct.client, deadLetterTableInput(`${coldTable}-dead-letters`));
const coldStore = operationsTable(coldTable)(checks);
// Reconcile's dispatcher hands the due job to its poll queue (SQS on the same moto).
const sqs = new SQSClient({ endpoint: db.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' } });
const { QueueUrl: pollQueueUrl = '' } = await sqs.send(new CreateQueueCommand({ QueueName: 'bench-cold-poll' }));
sqs.destroy();
let coldRun = 0;

/** The first invocation each function meets: a webhook, a queued transition, a dispatch of one due operation. */
async function invocation(fn: FunctionName): Promise<{ event: unknown; env: Record<string, string> }> {
  const name = `batches/cold-${fn}-${++coldRun}`;
  const env = { DYNAMODB_ENDPOINT: db.endpoint, TABLE_NAME: coldTable };
  if (fn === 'api') {
    const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: name }));
    return { event: httpApiEvent('POST', '/webhooks/gemini', body, headers), env: { ...env, WEBHOOK_SIGNING_SECRETS: secret } };
  }
  if (fn === 'effects') {
    const image = { ...trackedRecord(name, 'batch', '2026-11-30T10:00:00.000000000Z'), state: 'SUCCEEDED', version: 2, stateChanged: true };
    const record = {
      eventName: 'MODIFY',
      eventID: '1',
      dynamodb: {
        SequenceNumber: String(100 + coldRun),
        Keys: { name: { S: name } },
        NewImage: marshall({ ...image, writeKind: 'state-change' }),
      },
    };
    const message = {
      messageId: `m${coldRun}`,
      receiptHandle: 'r',
      body: JSON.stringify(record),
      attributes: { ApproximateReceiveCount: '1', ApproximateFirstReceiveTimestamp: String(Date.now()), MessageGroupId: 'g' },
      messageAttributes: {},
    };
    return {
      event: { Records: [message] },
      env: {
        ...env,
        EFFECTS_WEBHOOK_URL: receiver.url,
        EFFECTS_SIGNING_SECRET: secret,
        EFFECTS_LEDGER_TABLE: `${coldTable}-ledger`,
        EFFECTS_DEAD_LETTER_TABLE: `${coldTable}-dead-letters`,
        EFFECTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/unused.fifo',
      },
    };
  }
  await coldStore.write(trackedRecord(name, 'batch', '2026-11-30T10:00:00.000000000Z'), undefined);
  gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T11:00:00Z' });
  return {
    event: {},
    env: {
      ...env,
      GEMINI_API_KEY: 'bench-key',
      GEMINI_BASE_URL: gemini.baseUrl,
      POLL_QUEUE_URL: pollQueueUrl,
      AWS_ENDPOINT_URL_SQS: db.endpoint,
    },
  };
}

type Measured = { initKb: number; totalKb: number; loadMs: number; totalMs: number };

/** Cold starts of each set of bundles, taken in turn (this code's, then the ref's, and again) so that noise falls on both alike. */
async function measure(sets: Bundles[]): Promise<Array<Record<FunctionName, Measured>>> {
  const results = sets.map(() => ({}) as Record<FunctionName, Measured>);
  for (const fn of FUNCTIONS) {
    const runs = sets.map(() => [] as Array<{ loadMs: number; firstInvocationMs: number }>);
    for (let i = 0; i < COLD_RUNS; i++) {
      for (const [at, bundles] of sets.entries()) {
        const { event, env } = await invocation(fn);
        runs[at]?.push(await coldStart(bundles[fn].entry, event, env));
      }
    }
    for (const [at, bundles] of sets.entries()) {
      const taken = runs[at] ?? [];
      (results[at] as Record<FunctionName, Measured>)[fn] = {
        initKb: bundles[fn].initBytes / 1024,
        totalKb: bundles[fn].totalBytes / 1024,
        loadMs: median(taken.map((r) => r.loadMs)),
        totalMs: median(taken.map((r) => r.loadMs + r.firstInvocationMs)),
      };
    }
  }
  return results;
}

// The floor: a hello-world handler bundled and cold-started the same way, as many times.
const { bundleLambda } = await import('../lib/lambda-bundle.ts');
const hello = bundleLambda('bench/hello-handler.ts', join(outdir, 'hello'), ROOT);
const floorRuns: number[] = [];
for (let i = 0; i < COLD_RUNS; i++) {
  const { loadMs, firstInvocationMs } = await coldStart(hello.entry, {}, {});
  floorRuns.push(loadMs + firstInvocationMs);
}
const floorMs = median(floorRuns);
const sets = [await buildBundles(ROOT, join(outdir, 'now'))];
if (COMPARE_REF) sets.push(await buildBundlesAt(COMPARE_REF, ROOT, join(outdir, 'ref')));
const [now, before] = (await measure(sets)) as [Record<FunctionName, Measured>, Record<FunctionName, Measured> | undefined];
const lambdaNode = (await import('node:child_process')).execFileSync(LAMBDA_NODE, ['--version']).toString().trim();
console.log(`\n## Lambda bundles: size and cold start\n`);
console.log(
  `Built as the stack builds them (lib/lambda-bundle.ts); init KB = the entry and every chunk it imports statically (what a cold start reads), all KB = every chunk, the lazily loaded ones too; cold start = a new Node ${lambdaNode} process loading the entry, then its first invocation against moto; median of ${COLD_RUNS}${before ? `, taken in turn with ${COMPARE_REF}'s (built as that ref's stack built them); ratios to it` : ''}\n`,
);
console.log(
  `| function | init KB | all KB | load ms | load + first invocation ms | × floor |${before ? ' init KB ×ref | load ×ref | cold start ×ref |' : ''}`,
);
console.log(`|---|---:|---:|---:|---:|---:|${before ? '---:|---:|---:|' : ''}`);
console.log(
  `| floor (a hello-world handler, bench/hello-handler.ts) | ${(hello.initBytes / 1024).toFixed(0)} | ${(hello.totalBytes / 1024).toFixed(0)} | | ${floorMs.toFixed(0)} | 1.00 |${before ? ' | | |' : ''}`,
);
for (const fn of FUNCTIONS) {
  const n = now[fn];
  const b = before?.[fn];
  const ratios = b
    ? ` ${(n.initKb / b.initKb).toFixed(2)} | ${(n.loadMs / b.loadMs).toFixed(2)} | ${(n.totalMs / b.totalMs).toFixed(2)} |`
    : '';
  console.log(
    `| ${fn} | ${n.initKb.toFixed(0)} | ${n.totalKb.toFixed(0)} | ${n.loadMs.toFixed(0)} | ${n.totalMs.toFixed(0)} | ${(n.totalMs / floorMs).toFixed(2)} |${ratios}`,
  );
}

await gemini.stop();
await receiver.stop();
direct.destroy();
rmSync(outdir, { recursive: true, force: true });
await db.stop();
process.exit(0); // esbuild's service and keep-alive sockets would hold the process open
