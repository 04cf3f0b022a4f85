/**
 * The one test with bundling on: synthesize the stack with the local esbuild,
 * then run the bundled functions (as Lambda loads them: the ES module `index.mjs`, its chunks beside it)
 * against moto: the API with a signed webhook, the effects handler
 * with a stream event whose transition goes to a test receiver.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { CreateQueueCommand, DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { marshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import {
  createTableInput,
  deadLetterTableInput,
  historyTable,
  historyTableInput,
  keyedTableInput,
  openDynamoDb,
  operationsTable,
} from '../../engines/dynamodb/index.ts';
import { httpApiEvent } from '../support/api-gateway.ts';
import { runBundle as runBundleAt } from '../support/aws/lambda-host.ts';
import { MOTO_CREDENTIALS, MOTO_REGION } from '../support/aws/moto.ts';
import { type Synthesized, synthesizeWithBundles } from '../support/aws/synth.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { Receiver } from '../support/receiver.ts';

let synthesized: Synthesized;
let bundles: Record<'Api' | 'Effects' | 'Reconcile' | 'PollWorker' | 'HistoryWriter' | 'BedrockEvents', string>;
/** A poll queue on moto, as the stack's: the dispatcher sends to it, the worker's event source reads it. */
let pollQueueUrl: string;
/** What the dispatcher needs to reach it: the queue, and SQS on moto with moto's credentials. */
const pollQueue = () => ({
  POLL_QUEUE_URL: pollQueueUrl,
  AWS_ENDPOINT_URL_SQS: inject('dynamodbEndpoint'),
  AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
  AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
});

beforeAll(async () => {
  const sqs = new SQSClient({ endpoint: inject('dynamodbEndpoint'), region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  ({ QueueUrl: pollQueueUrl = '' } = await sqs.send(new CreateQueueCommand({ QueueName: `bundle-poll-${Date.now()}` })));
  sqs.destroy();
  synthesized = synthesizeWithBundles();
  bundles = {
    Api: synthesized.bundleOf('Api'),
    Effects: synthesized.bundleOf('Effects'),
    Reconcile: synthesized.bundleOf('Reconcile'),
    PollWorker: synthesized.bundleOf('PollWorker'),
    HistoryWriter: synthesized.bundleOf('HistoryWriter'),
    BedrockEvents: synthesized.bundleOf('BedrockEvents'),
  };
});
afterAll(() => synthesized.remove());

function runBundle(bundle: string, events: unknown[], env: Record<string, string>): Promise<unknown[]> {
  return runBundleAt(bundle, events, { DYNAMODB_ENDPOINT: inject('dynamodbEndpoint'), ...env });
}

describe('bundled functions', () => {
  it('are six bundles, one per function (CDK caches a bundling by its JSON, blind to the build function)', () => {
    expect(new Set(Object.values(bundles).map(dirname)).size).toBe(6);
  });

  it("load every chunk as an ES module on this Node, the lazily imported ones too (Lambda client, SQS, jose, the providers' SDKs)", async () => {
    // The entries run in the tests below; here every other chunk, which a test might never reach.
    for (const bundle of Object.values(bundles)) {
      const chunks = readdirSync(dirname(bundle)).filter((file) => file.endsWith('.mjs') && file !== 'index.mjs');
      const script = `Promise.all(process.argv.slice(1).map((f) => import(require('node:url').pathToFileURL(f).href))).then(() => console.log('loaded'))`;
      const { stdout } = await promisify(execFile)(
        process.execPath,
        ['-e', script, ...chunks.map((chunk) => join(dirname(bundle), chunk))],
        {
          env: { PATH: process.env.PATH, AWS_REGION: 'us-east-1' },
        },
      );
      expect({ bundle, chunks: chunks.length, stdout: stdout.trim() }).toMatchObject({ stdout: 'loaded' });
      expect(chunks.length).toBeGreaterThan(0);
    }
  });

  it('hold only what the Lambdas use: no dev-only package (local runtime, CLI, tests, CDK), and of ours the core, the providers, the application, the DynamoDB engine and lambda/', () => {
    const lock = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package-lock.json'), 'utf8')).packages as Record<string, { dev?: boolean }>;
    for (const bundle of Object.values(bundles)) {
      const maps = readdirSync(dirname(bundle)).filter((file) => file.endsWith('.mjs.map'));
      const sources = maps.flatMap(
        (map) => (JSON.parse(readFileSync(join(dirname(bundle), map), 'utf8')) as { sources: string[] }).sources,
      );
      // `node_modules/a/node_modules/@b/c/dist/x.js` → the lockfile key `node_modules/a/node_modules/@b/c`.
      const packages = new Set(
        sources.flatMap((source) => source.match(/node_modules\/(?:@[^/]+\/)?[^/]+(?:\/node_modules\/(?:@[^/]+\/)?[^/]+)*/)?.[0] ?? []),
      );
      const ours = sources
        .filter((source) => !source.includes('node_modules/'))
        .map((source) => relative(PROJECT_ROOT, resolve(dirname(bundle), source)));
      expect(packages.size).toBeGreaterThan(5);
      expect([...packages].filter((path) => !lock[path] || lock[path].dev)).toEqual([]);
      expect([...packages].filter((path) => /\/(aws-cdk-lib|constructs)$/.test(path))).toEqual([]);
      expect(ours.filter((source) => !/^(core|providers|app|engines\/dynamodb|lambda)\//.test(source))).toEqual([]);
      // Never another engine, nor the one-machine server.
      expect(ours.filter((source) => /^(engines\/(sqlite|postgres)|local)\//.test(source))).toEqual([]);
    }
  });

  it('a fresh deploy is safe until configured: the API answers 503 not-configured, reconcile polls nothing it has no key for, effects wait', async () => {
    const delivery = signedDelivery(newSecret(), envelope('batch.expired', { id: 'batches/not-configured' }));
    const [webhook] = (await runBundle(bundles.Api, [httpApiEvent('POST', '/webhooks/gemini', delivery.body, delivery.headers)], {
      TABLE_NAME: inject('tableName'),
      WEBHOOK_SIGNING_SECRETS: 'not-configured',
    })) as Array<{ statusCode: number; body: string }>;
    expect({ status: webhook?.statusCode, error: JSON.parse(webhook?.body ?? '{}').error }).toEqual({
      status: 503,
      error: 'not-configured',
    });
    // Bedrock is polled with the function's own role wherever it runs: reconcile runs, and finds nothing to hand out.
    const fresh = `${inject('tableName')}-bundle-fresh`;
    const { client } = openDynamoDb({ endpoint: inject('dynamodbEndpoint'), tables: {} });
    await ensureTable(client, createTableInput(fresh));
    client.destroy();
    expect(await runBundle(bundles.Reconcile, [{}], { TABLE_NAME: fresh, GEMINI_API_KEY: 'not-configured', ...pollQueue() })).toEqual([
      expect.objectContaining({ dispatched: 0, failed: 0 }),
    ]);
    // The invocation fails, so the queue keeps the message and offers it again later.
    const effects = runBundle(bundles.Effects, [{ Records: [] }], {
      EFFECTS_WEBHOOK_URL: 'http://127.0.0.1:9/effects',
      EFFECTS_SIGNING_SECRET: 'not-configured',
      EFFECTS_LEDGER_TABLE: 'l',
      EFFECTS_DEAD_LETTER_TABLE: 'd',
      EFFECTS_QUEUE_URL: 'q',
    });
    await expect(effects).rejects.toThrow(/EFFECTS_SIGNING_SECRET is not configured/);
  });

  it('the API bundle serves a signed webhook', async () => {
    expect(existsSync(bundles.Api)).toBe(true);
    const secret = newSecret();
    const name = `batches/bundle-${Date.now()}`;
    const delivery = signedDelivery(secret, envelope('batch.expired', { id: name }));
    const events = [
      httpApiEvent('GET', '/healthz'),
      httpApiEvent('POST', '/webhooks/gemini', delivery.body, delivery.headers),
      httpApiEvent('GET', `/operations/${name}`),
    ];
    const [health, webhook, read] = (await runBundle(bundles.Api, events, {
      TABLE_NAME: inject('tableName'),
      WEBHOOK_SIGNING_SECRETS: secret,
    })) as Array<{
      statusCode: number;
      body: string;
    }>;
    expect(health?.statusCode).toBe(200);
    expect({ status: webhook?.statusCode, body: JSON.parse(webhook?.body ?? '{}') }).toMatchObject({
      status: 200,
      body: { applied: true },
    });
    expect(JSON.parse(read?.body ?? '{}')).toMatchObject({ name, state: 'EXPIRED', version: 1 });
  });

  it('the effects bundle sends a queued transition as a signed webhook, once, configured through Secrets Manager as deployed', async () => {
    expect(existsSync(bundles.Effects)).toBe(true);
    const secret = newSecret();
    const receiver = await new Receiver(secret).start();
    const secrets = new SecretsManagerClient({ endpoint: inject('dynamodbEndpoint'), region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
    const createSecret = async (name: string, value: string) =>
      (await secrets.send(new CreateSecretCommand({ Name: `bundle-${name}-${Date.now()}`, SecretString: value }))).ARN as string;
    const ledgerTable = `${inject('tableName')}-bundle-ledger`;
    const deadLetterTable = `${inject('tableName')}-bundle-dead-letters`;
    const { client } = openDynamoDb({ endpoint: inject('dynamodbEndpoint'), tables: {} });
    await ensureTable(client, keyedTableInput(ledgerTable));
    await ensureTable(client, deadLetterTableInput(deadLetterTable));
    client.destroy();
    try {
      const image = {
        ...trackedRecord(`batches/bundle-effect-${Date.now()}`, 'batch', '2026-11-30T10:00:00.000000000Z'),
        state: 'SUCCEEDED' as const,
        version: 2,
        stateChanged: true,
      };
      const record = {
        eventName: 'MODIFY',
        eventID: '1',
        dynamodb: { SequenceNumber: '100', Keys: { name: { S: image.name } }, NewImage: marshall({ ...image, writeKind: 'state-change' }) },
      };
      // As the effects queue hands it over: the Pipe put the stream record in the body.
      const message = {
        messageId: 'm1',
        receiptHandle: 'r1',
        body: JSON.stringify(record),
        attributes: { ApproximateReceiveCount: '1', ApproximateFirstReceiveTimestamp: String(Date.now()), MessageGroupId: 'g' },
        messageAttributes: {},
      };
      const event = { Records: [message] };
      const results = await runBundle(bundles.Effects, [event, event], {
        EFFECTS_LEDGER_TABLE: ledgerTable,
        EFFECTS_DEAD_LETTER_TABLE: deadLetterTable,
        EFFECTS_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/unused.fifo',
        // As `npm run connect -- --effects-url` leaves them.
        EFFECTS_WEBHOOK_URL_ARN: await createSecret('EffectsWebhookUrl', receiver.url),
        EFFECTS_SIGNING_SECRET_ARN: await createSecret('EffectsSigningSecret', secret),
        AWS_ENDPOINT_URL_SECRETS_MANAGER: inject('dynamodbEndpoint'),
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
      });
      expect(results).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
      expect(receiver.accepted.map((d) => [d.id, d.signatureValid, d.body.data.state])).toEqual([[`${image.name}#2`, true, 'SUCCEEDED']]);
    } finally {
      await receiver.stop();
      secrets.destroy();
    }
  });
});

describe('bundled reconcile functions', () => {
  /** A dispatcher run, then the worker given what it sent, as the poll queue's event source hands it: the worker's answer. */
  async function dispatchAndPoll(env: Record<string, string>): Promise<{ dispatched: unknown; worker: unknown }> {
    const [stats] = (await runBundle(bundles.Reconcile, [{}], { ...env, ...pollQueue() })) as Array<{ dispatched: number }>;
    const sqs = new SQSClient({ endpoint: inject('dynamodbEndpoint'), region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
    try {
      const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: pollQueueUrl, MaxNumberOfMessages: 10 }));
      const Records = Messages.map((message) => ({ messageId: message.MessageId, body: message.Body }));
      const [worker] = await runBundle(bundles.PollWorker, [{ Records }], env);
      for (const message of Messages)
        await sqs.send(new DeleteMessageCommand({ QueueUrl: pollQueueUrl, ReceiptHandle: message.ReceiptHandle }));
      return { dispatched: stats?.dispatched, worker };
    } finally {
      sqs.destroy();
    }
  }

  it("leave a Gemini job unpolled without Gemini's key, and poll the fake Gemini once the key is set", async () => {
    expect(existsSync(bundles.Reconcile)).toBe(true);
    expect(existsSync(bundles.PollWorker)).toBe(true);
    // A table of its own: reconcile hands out every open operation it finds.
    const table = `${inject('tableName')}-bundle`;
    const { client, operations: store } = openDynamoDb({
      endpoint: inject('dynamodbEndpoint'),
      tables: { operations: operationsTable(table) },
    });
    await ensureTable(client, createTableInput(table));
    const name = `batches/bundle-poll-${Date.now()}`;
    // Tracked now: a job tracked more than TRACKED_EXPIRY_DAYS ago and never seen is no longer polled (expired-unseen).
    await store.write(trackedRecord(name, 'batch', timeFromDate(new Date())), undefined);
    const gemini = await new FakeGemini('bundle-key').start();
    gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T11:00:00Z' });
    try {
      // No poller for Gemini here: not polled, not a failure (no request made), backed off; its record unchanged.
      expect(await dispatchAndPoll({ TABLE_NAME: table })).toEqual({ dispatched: 1, worker: { batchItemFailures: [] } });
      expect(await store.get(name)).toMatchObject({ state: null, version: 1 });
      expect(gemini.requests).toEqual([]);
      await store.pollNow(name, timeFromDate(new Date()));
      const polled = await dispatchAndPoll({ TABLE_NAME: table, GEMINI_API_KEY: 'bundle-key', GEMINI_BASE_URL: gemini.baseUrl });
      expect(polled).toEqual({ dispatched: 1, worker: { batchItemFailures: [] } });
      // The dispatcher's hourly chores (the webhooks pointing here, the key's batches), then the worker's poll.
      expect(gemini.requests).toEqual(['webhooks', 'batches', name]);
      expect(await store.get(name)).toMatchObject({ state: 'SUCCEEDED', providerState: 'JOB_STATE_SUCCEEDED' });
    } finally {
      await gemini.stop();
      client.destroy();
    }
  });
});

describe('bundled Bedrock events function', () => {
  it("applies a batch job's state change from the default bus to the job it names, once however often it comes", async () => {
    expect(existsSync(bundles.BedrockEvents)).toBe(true);
    const id = `bundle${Date.now().toString(36)}`;
    const jobArn = `arn:aws:bedrock:${MOTO_REGION}:123456789012:model-invocation-job/${id}`;
    const event = {
      version: '0',
      id: `evt-${id}`,
      'detail-type': 'Batch Inference Job State Change',
      source: 'aws.bedrock',
      account: '123456789012',
      time: new Date().toISOString(),
      region: MOTO_REGION,
      resources: [jobArn],
      detail: { batchJobArn: jobArn, batchJobName: 'bundle', status: 'Stopped' },
    };
    const results = await runBundle(bundles.BedrockEvents, [event, event], { TABLE_NAME: inject('tableName') });
    expect(results).toEqual([
      { decision: 'applied', reason: '' },
      { decision: 'discarded', reason: 'duplicate' },
    ]);
    const { client, operations: store } = openDynamoDb({
      endpoint: inject('dynamodbEndpoint'),
      tables: { operations: operationsTable(inject('tableName')) },
    });
    try {
      expect(await store.get(`bedrock/${MOTO_REGION}/123456789012/model-invocation-jobs/${id}`)).toMatchObject({
        kind: 'bedrock-batch',
        state: 'CANCELLED',
        providerState: 'Stopped',
        resultPending: true,
        version: 1,
      });
    } finally {
      client.destroy();
    }
  });
});

describe('bundled history writer', () => {
  it('writes a stream record as a history entry, once however often it comes', async () => {
    expect(existsSync(bundles.HistoryWriter)).toBe(true);
    const table = `${inject('tableName')}-bundle-history`;
    const { client, history } = openDynamoDb({ endpoint: inject('dynamodbEndpoint'), tables: { history: historyTable(table) } });
    await ensureTable(client, historyTableInput(table));
    const image = {
      ...trackedRecord(`batches/bundle-history-${Date.now()}`, 'batch', '2026-11-30T10:00:00.000000000Z'),
      writeKind: 'track',
    };
    const record = {
      eventName: 'INSERT',
      eventID: '1',
      dynamodb: { SequenceNumber: '1', Keys: { name: { S: image.name } }, NewImage: marshall(image) },
    };
    try {
      const results = await runBundle(bundles.HistoryWriter, [{ Records: [record] }, { Records: [record] }], { HISTORY_TABLE: table });
      expect(results).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }]);
      expect(await history.list(image.name)).toEqual([expect.objectContaining({ version: 1, source: 'track', state: null })]);
    } finally {
      client.destroy();
    }
  });
});
