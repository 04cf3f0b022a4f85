/**
 * Reconcile fanned out as the AWS stack runs it, on moto: the operations table
 * (its CreateTable from the stack's own description) and a standard SQS queue,
 * the dispatcher and the poll workers run in this process from their code
 * (lambda/reconcile/fanout.ts, with the handlers' settings: POLLS_AT_ONCE,
 * messages of JOBS_PER_MESSAGE, batches of 10 as the event source's default),
 * each worker as its own Lambda environment would be (its own pollers and key
 * holds), a loop receiving and deleting as Lambda's SQS poller does. A fake
 * Gemini on 127.0.0.1 answers in 100 ms through the real @google/genai SDK,
 * and answers one of the two keys 429 with a Retry-After.
 *
 * 5,000 jobs due over two keys: each of the free key's polled exactly once for
 * its due time, the limited key held back alone (a handful of requests, those
 * jobs backed off, the rest left due: none lost); a duplicate message polls
 * nothing; a message that cannot be read is reported failed alone; a worker
 * killed after its leases leaves its jobs due again once the lease ends, and
 * then they are polled once; discovery and the webhook health check run once
 * however many dispatches.
 */
import { CreateQueueCommand, DeleteMessageBatchCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CredentialHealth } from '../../app/reconcile/credentials.ts';
import { HeldKeys } from '../../app/reconcile/held-keys.ts';
import { openPollers, openReconciler, type ReconcileSettings } from '../../app/reconcile/open.ts';
import type { ReconcileStats } from '../../app/reconcile/reconcile.ts';
import { OPERATION_KINDS } from '../../core/lifecycle.ts';
import type { OverdueLimits } from '../../core/overdue.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import { createTableInput, type DynamoDbOperationStore, openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { OPEN_INDEX_PARTITION, OPEN_INDEX_SORT, POLL_BUCKETS, pollBucketOf } from '../../engines/dynamodb/tables.ts';
import { dispatchDue, type PollMessage, pollMessages } from '../../lambda/reconcile/fanout.ts';
import { POLLS_AT_ONCE } from '../../lambda/reconcile/fanout-settings.ts';
import { MOTO_CREDENTIALS, MOTO_REGION } from '../support/aws/moto.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { silentLogger } from '../support/silent-logger.ts';

const JOBS = 5_000;
/**
 * The free key's share: each of its jobs costs moto three writes (the lease, the poll's outcome, its next poll),
 * one at a time; the limited key's jobs, held back, cost none.
 */
const FREE_JOBS = 300;
/** Three at once: moto serves DynamoDB one request at a time, and more would queue past the client's 2 s timeout. */
const WORKERS = 3;
/** The event source's batch (the construct's default). */
const BATCH = 10;
const FREE = 'key-free';
const LIMITED = 'key-limited';
const RETRY_AFTER_SECONDS = 120;
/** The overdue sweep is another test's (its queries of every kind's age partitions would cost moto seconds here). */
const NO_OVERDUE = Object.fromEntries(OPERATION_KINDS.map((kind) => [kind, null])) as OverdueLimits;

let gemini: FakeGemini;
let store: DynamoDbOperationStore;
let dynamodb: ReturnType<typeof openDynamoDb<{ operations: ReturnType<typeof operationsTable> }>>;
let sqs: SQSClient;
let queueUrl: string;
let tableName: string;
let seededDue: string;
const run = Date.now().toString(36);
const nameOf = (key: 'a' | 'b', i: number) => `batches/fan-${run}-${key}-${i}`;

const options = () => ({
  gemini: {
    apiKey: FREE,
    keys: [
      { label: 'a', apiKey: FREE },
      { label: 'b', apiKey: LIMITED },
    ],
    baseUrl: gemini.baseUrl,
  },
  timeoutMs: 5_000,
});
const settings = (): ReconcileSettings => ({
  intervalSeconds: 60,
  unseenExpiryMs: 30 * 86_400_000,
  overdueAfter: NO_OVERDUE,
  webhookUrl: 'https://ratchet.example/webhooks/gemini',
  poller: async () => options(),
});

/** Writes jobs straight into the table as tracked ones due at `due` (the index's keys and projection included). */
async function seed(names: Array<{ name: string; credential: string }>, due: string): Promise<void> {
  const items = names.map(({ name, credential }) => ({
    ...trackedRecord(name, 'batch', timeFromDate(new Date(Date.now() - 3_600_000)), undefined, credential),
    writeKind: 'track',
    [OPEN_INDEX_PARTITION]: pollBucketOf(name),
    [OPEN_INDEX_SORT]: due,
  }));
  // Four writers at once: moto serves DynamoDB one request at a time, more would only wait for a socket.
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let at = next; at < items.length; at = next) {
        next += 25;
        const RequestItems = { [tableName]: items.slice(at, at + 25).map((Item) => ({ PutRequest: { Item } })) };
        await dynamodb.documents.send(new BatchWriteCommand({ RequestItems }));
      }
    }),
  );
}

/** One worker environment: its own pollers and key holds, as a Lambda instance has. */
async function worker() {
  const opened = await openPollers(settings(), { logger: silentLogger, credentials: new CredentialHealth(['a', 'b']) });
  return new HeldKeys(opened?.poller as NonNullable<typeof opened>['poller']);
}

const workerDeps = (poller: Pick<HeldKeys, 'poll'> & Partial<Pick<HeldKeys, 'heldFor'>>, leaseMs = 60_000) => ({
  store,
  poller,
  ...(poller.heldFor && { heldFor: poller.heldFor.bind(poller) }),
  logger: silentLogger,
  intervalSeconds: 60,
  budgetMs: 50_000,
  leaseMs,
  concurrency: POLLS_AT_ONCE,
});

/** Lambda's SQS poller for `workers` environments at once, until the queue is empty: each batch's results. */
async function drain(workers: HeldKeys[]): Promise<Array<Awaited<ReturnType<typeof pollMessages>>>> {
  const results: Array<Awaited<ReturnType<typeof pollMessages>>> = [];
  await Promise.all(
    workers.map(async (poller) => {
      for (;;) {
        const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: BATCH }));
        if (Messages.length === 0) return;
        const records = Messages.map((message) => ({ messageId: message.MessageId as string, body: message.Body as string }));
        const result = await pollMessages(records, workerDeps(poller));
        results.push(result);
        const failed = new Set(result.batchItemFailures.map((failure) => failure.itemIdentifier));
        const done = Messages.filter((message) => !failed.has(message.MessageId as string));
        if (done.length > 0)
          await sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: queueUrl,
              Entries: done.map((message, i) => ({ Id: String(i), ReceiptHandle: message.ReceiptHandle as string })),
            }),
          );
      }
    }),
  );
  return results;
}

const pollsOf = (key: string) => {
  const counts = new Map<string, number>();
  gemini.requests.forEach((path, i) => {
    if (gemini.requestKeys[i] === key && path.startsWith(`batches/fan-${run}`)) counts.set(path, (counts.get(path) ?? 0) + 1);
  });
  return counts;
};
/** A table and a poll queue of their own, as the stack makes them (the queue's visibility six times the worker's timeout). */
async function useFresh(id: string): Promise<void> {
  tableName = `${inject('tableName')}-fanout-${run}-${id}`;
  store = operationsTable(tableName)(dynamodb.documents);
  await ensureTable(dynamodb.client, createTableInput(tableName));
  ({ QueueUrl: queueUrl = '' } = await sqs.send(
    new CreateQueueCommand({ QueueName: `ratchet-poll-${run}-${id}`, Attributes: { VisibilityTimeout: '720' } }),
  ));
}

/** The jobs due now, as the index holds them (a Query per partition: no reads of the items). */
async function dueNow() {
  const now = timeFromDate(new Date());
  const pages = await Promise.all(Array.from({ length: POLL_BUCKETS }, (_, bucket) => store.dueJobs(bucket, now, 10_000)));
  return pages.flatMap((page) => page.jobs);
}

const sum = (results: Array<{ stats: ReconcileStats }>, field: 'polled' | 'applied' | 'failed') =>
  results.reduce((total, { stats }) => total + stats[field], 0);

// The Node 24 pass runs the same code on the same moto: this test takes most of its minute on moto's DynamoDB,
// which serves one request at a time, so it runs in the Node 22 pass only.
describe.skipIf(process.version.startsWith('v24.'))('reconcile fanned out through a queue, on moto', () => {
  beforeAll(async () => {
    const endpoint = inject('dynamodbEndpoint');
    dynamodb = openDynamoDb({ endpoint, tables: { operations: operationsTable(`${inject('tableName')}-fanout-${run}`) } });
    sqs = new SQSClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
    await useFresh('sweep');
    gemini = await new FakeGemini(FREE).start();
    gemini.otherKeys.add(LIMITED);
    gemini.answerDelayMs = 100;
    gemini.limitedKeys.set(LIMITED, RETRY_AFTER_SECONDS);
    gemini.webhooks.set('wh_1', {
      id: 'wh_1',
      uri: 'https://ratchet.example/webhooks/gemini',
      subscribed_events: ['batch.succeeded'],
      state: 'enabled',
      secrets: [],
      create_time: new Date().toISOString(),
      update_time: new Date().toISOString(),
    });
    const old = new Date(Date.now() - 3 * 86_400_000).toISOString();
    const jobs = Array.from({ length: JOBS }, (_, i) => {
      const key = i < FREE_JOBS ? 'a' : 'b';
      return { name: nameOf(key, i), credential: key };
    });
    for (const { name, credential } of jobs) {
      // Created before discovery's window: its sweep lists a page, adopts nothing, and stops.
      gemini.batches.set(name, { state: 'BATCH_STATE_RUNNING', updateTime: new Date().toISOString(), createTime: old });
      gemini.owners.set(name, credential === 'a' ? FREE : LIMITED);
    }
    seededDue = timeFromDate(new Date(Date.now() - 60_000));
    await seed(jobs, seededDue);
  }, 60_000);
  afterAll(async () => {
    await gemini?.stop();
    sqs?.destroy();
    dynamodb?.destroy();
  });

  it('polls each due job once, the limited key held back alone; discovery and the health check once however many dispatches', async () => {
    const dispatcher = await openReconciler(
      settings(),
      { store },
      {
        logger: silentLogger,
        credentials: new CredentialHealth(['a', 'b']),
        handOff: (now, deadlineMs) => dispatchDue({ store, sqs, queueUrl, room: 100_000, logger: silentLogger }, now, deadlineMs),
      },
    );
    const first = await dispatcher?.(50_000);
    expect(first).toMatchObject({ dispatched: JOBS, polled: 0 });
    const listed = gemini.requests.filter((path) => path === 'batches').length;
    const health = gemini.requests.filter((path) => path === 'webhooks').length;
    expect({ listed: listed > 0, health }).toEqual({ listed: true, health: 1 });

    const results = await drain(await Promise.all(Array.from({ length: WORKERS }, worker)));

    // The free key: every job polled exactly once, its state recorded.
    const free = pollsOf(FREE);
    expect(free.size).toBe(FREE_JOBS);
    expect([...free.values()].every((count) => count === 1)).toBe(true);
    expect(sum(results, 'applied')).toBe(FREE_JOBS);
    expect((await store.get(nameOf('a', 0)))?.state).toBe('RUNNING');
    // The limited key: asked a handful of times (each worker's polls in flight when the first 429 came, and the
    // SDK's one retry of each), not once per job. Those backed off; the rest left untouched, still due: none lost.
    const asked = pollsOf(LIMITED);
    const requests = [...asked.values()].reduce((total, count) => total + count, 0);
    expect(requests).toBeGreaterThan(0);
    expect(requests).toBeLessThanOrEqual(WORKERS * POLLS_AT_ONCE * 2);
    const backedOff = sum(results, 'failed');
    expect(backedOff).toBeGreaterThanOrEqual(asked.size);
    expect(backedOff).toBeLessThanOrEqual(WORKERS * POLLS_AT_ONCE);
    const held = await store.describe([...asked.keys()][0] as string);
    expect(held?.polling).toMatchObject({ failedPolls: 1, note: expect.stringContaining('429') });
    expect(Date.parse(held?.polling.nextPollAt as string)).toBeGreaterThan(Date.now() + 60_000);
    expect(results.flatMap((result) => result.batchItemFailures)).toEqual([]);
    const due = await dueNow();
    expect(due.length).toBe(JOBS - FREE_JOBS - backedOff);
    expect(due.every((job) => job.credential === 'b' && job.due === seededDue)).toBe(true);

    // More dispatches within the hour: the held key's jobs handed out again; no listing, no health check.
    for (let i = 0; i < 2; i++) expect(await dispatcher?.(50_000)).toMatchObject({ dispatched: due.length });
    expect(gemini.requests.filter((path) => path === 'batches').length).toBe(listed);
    expect(gemini.requests.filter((path) => path === 'webhooks').length).toBe(health);
  }, 200_000);

  it('a duplicate message polls nothing twice; a message that cannot be read is reported failed, alone', async () => {
    const before = gemini.requests.length;
    const stale: PollMessage = {
      provider: 'gemini',
      credential: 'a',
      jobs: [{ name: nameOf('a', 0), due: timeFromDate(new Date(Date.now() - 60_000)) }],
    };
    const seen = (await store.describe(nameOf('a', 2)))?.polling.nextPollAt as string;
    // The same job handed out twice for its next due time: one lease wins.
    const twice: PollMessage = { provider: 'gemini', credential: 'a', jobs: [{ name: nameOf('a', 2), due: seen }] };
    const poller = await worker();
    const [one, other] = await Promise.all([
      pollMessages(
        [
          { messageId: 'stale', body: JSON.stringify(stale) },
          { messageId: 'unreadable', body: '{"jobs": [' },
          { messageId: 'first', body: JSON.stringify(twice) },
        ],
        workerDeps(poller),
      ),
      pollMessages([{ messageId: 'second', body: JSON.stringify(twice) }], workerDeps(poller)),
    ]);
    expect(one.batchItemFailures).toEqual([{ itemIdentifier: 'unreadable' }]);
    expect(other.batchItemFailures).toEqual([]);
    expect(one.stats.polled + other.stats.polled).toBe(1);
    expect(gemini.requests.slice(before)).toEqual([nameOf('a', 2)]);
  }, 30_000);

  it('a worker killed after its leases leaves its jobs due again when the lease ends; then each is polled once', async () => {
    await useFresh('killed');
    const names = Array.from({ length: 100 }, (_, i) => ({ name: `batches/fan-${run}-killed-${i}`, credential: 'a' }));
    for (const { name } of names) {
      gemini.batches.set(name, { state: 'BATCH_STATE_RUNNING', updateTime: new Date().toISOString() });
      gemini.owners.set(name, FREE);
    }
    await seed(names, timeFromDate(new Date(Date.now() - 1_000)));
    const now = () => timeFromDate(new Date());
    expect(await dispatchDue({ store, sqs, queueUrl, room: 100_000, logger: silentLogger }, now(), Date.now() + 30_000)).toBe(100);
    const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: BATCH }));
    expect(Messages).toHaveLength(2);
    // The killed worker: it leases each job as its poll's turn comes, starts POLLS_AT_ONCE polls, and never answers
    // (nor writes) again.
    const leaseMs = 2_000;
    let starts = 0;
    let polling!: () => void;
    const started = new Promise<void>((resolve) => {
      polling = resolve;
    });
    const dead = {
      poll: () => {
        if (++starts === POLLS_AT_ONCE) polling();
        return new Promise<never>(() => {});
      },
    };
    void pollMessages(
      Messages.map((message) => ({ messageId: message.MessageId as string, body: message.Body as string })),
      workerDeps(dead, leaseMs),
    );
    await started;
    const leasedAt = Date.now();
    // Its leased jobs are not due now: a dispatch hands out the others only, and they are polled.
    const dispatch = (at: string) => dispatchDue({ store, sqs, queueUrl, room: 100_000, logger: silentLogger }, at, Date.now() + 30_000);
    expect(await dispatch(now())).toBe(names.length - POLLS_AT_ONCE);
    expect(sum(await drain([await worker()]), 'polled')).toBe(names.length - POLLS_AT_ONCE);
    // After the lease (the dispatcher's clock past it): the killed worker's jobs due again, handed out, polled.
    expect(await dispatch(timeFromDate(new Date(leasedAt + leaseMs + 1_000)))).toBe(POLLS_AT_ONCE);
    expect(sum(await drain([await worker()]), 'polled')).toBe(POLLS_AT_ONCE);
    const polls = pollsOf(FREE);
    expect(names.map(({ name }) => polls.get(name))).toEqual(names.map(() => 1));
  }, 30_000);
});
