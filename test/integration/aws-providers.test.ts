/**
 * OpenAI, Anthropic and Bedrock jobs on the AWS home, on moto: the deployed
 * entry points themselves (lambda/handlers/api.ts fed API Gateway events,
 * reconcile.ts as the schedule runs it, handing the due jobs to a poll queue
 * on moto, poll-worker.ts fed that queue's messages, bedrock-events.ts fed
 * EventBridge events), each composed from its environment at cold start as in Lambda,
 * their secrets read from moto's Secrets Manager by ARN as deployed, and the
 * providers' real SDKs (inside reconcile) pointed at the fake servers.
 */
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { CreateQueueCommand, DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2, Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { timeFromDate } from '../../core/time.ts';
import { createTableInput, openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import type { BedrockJobEvent } from '../../lambda/bedrock-events.ts';
import { httpApiEvent } from '../support/api-gateway.ts';
import { MOTO_ACCOUNT, MOTO_CREDENTIALS, MOTO_REGION } from '../support/aws/moto.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { newSecret } from '../support/deliveries.ts';
import { anthropicBatch, type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { bedrockJob, type FakeBedrock, startFakeBedrock } from '../support/fake-bedrock.ts';
import { type FakeOpenAI, openaiBatch, openaiDelivery, startFakeOpenAI } from '../support/fake-openai.ts';

type Handler<E, R> = (event: E, context: Context) => Promise<R>;
type Answer = { statusCode: number; body: string };

const openaiSecret = newSecret();
const table = `${inject('tableName')}-aws-providers-${Date.now().toString(36)}`;
let openai: FakeOpenAI;
let anthropic: FakeAnthropic;
let bedrock: FakeBedrock;
let api: Handler<APIGatewayProxyEventV2, Answer>;
let reconcile: Handler<unknown, Record<string, number> | { skipped: string }>;
let pollWorker: Handler<SQSEvent, SQSBatchResponse>;
let sqs: SQSClient;
let pollQueueUrl: string;
let bedrockEvents: (event: BedrockJobEvent) => Promise<{ decision: string; reason: string }>;

const context = { awsRequestId: 'req', functionName: 'f', getRemainingTimeInMillis: () => 30_000 } as Context;

beforeAll(async () => {
  const endpoint = inject('dynamodbEndpoint');
  [openai, anthropic, bedrock] = await Promise.all([startFakeOpenAI(), startFakeAnthropic(), startFakeBedrock()]);
  // A table of its own: reconcile polls every open operation it finds.
  const { client } = openDynamoDb({ endpoint, tables: {} });
  await ensureTable(client, createTableInput(table));
  client.destroy();
  // The secrets as the construct binds them: each named by its ARN, its value in Secrets Manager.
  const secrets = new SecretsManagerClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  sqs = new SQSClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  ({ QueueUrl: pollQueueUrl = '' } = await sqs.send(new CreateQueueCommand({ QueueName: `${table}-poll` })));
  const secret = async (name: string, value: string) =>
    (await secrets.send(new CreateSecretCommand({ Name: `${table}-${name}`, SecretString: value }))).ARN as string;
  Object.assign(process.env, {
    TABLE_NAME: table,
    DYNAMODB_ENDPOINT: endpoint,
    AWS_REGION: MOTO_REGION,
    AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: endpoint,
    AWS_ENDPOINT_URL_SQS: endpoint,
    POLL_QUEUE_URL: pollQueueUrl,
    AWS_ENDPOINT_URL_BEDROCK: bedrock.url,
    WEBHOOK_SIGNING_SECRETS: newSecret(),
    OPENAI_WEBHOOK_SECRET_ARN: await secret('OpenAIWebhook', openaiSecret),
    OPENAI_API_KEY_ARN: await secret('OpenAIKeys', 'sk-aws'),
    OPENAI_BASE_URL: openai.url,
    ANTHROPIC_API_KEY_ARN: await secret('AnthropicKeys', 'team-a=sk-ant-a,team-b=sk-ant-b'),
    ANTHROPIC_BASE_URL: anthropic.url,
    // Azure's resource named, its webhook secret not: the route answers not-configured.
    AZURE_OPENAI_ENDPOINT: 'https://my-resource.openai.azure.com',
  });
  secrets.destroy();
  ({ handler: api } = (await import('../../lambda/handlers/api.ts')) as never);
  ({ handler: reconcile } = (await import('../../lambda/handlers/reconcile.ts')) as never);
  ({ handler: pollWorker } = (await import('../../lambda/handlers/poll-worker.ts')) as never);
  ({ handler: bedrockEvents } = (await import('../../lambda/handlers/bedrock-events.ts')) as never);
});

afterAll(async () => {
  await Promise.all([openai?.close(), anthropic?.close(), bedrock?.close()]);
  sqs?.destroy();
});

async function call(event: APIGatewayProxyEventV2) {
  const result = await api(event, context);
  return { status: result.statusCode, body: JSON.parse(result.body) };
}
const deliver = (path: string, delivery: { body: string; headers: Record<string, string> }) =>
  call(httpApiEvent('POST', path, delivery.body, delivery.headers));
const get = async (name: string) => (await call(httpApiEvent('GET', `/operations/${name}`))).body;
const track = (name: string) => call(httpApiEvent('POST', '/operations', JSON.stringify({ name }), { 'content-type': 'application/json' }));
/** A dispatcher run, then the poll worker given every message it sent, as the queue's event source hands them. */
async function run(): Promise<Record<string, number>> {
  const stats = (await reconcile({ source: 'aws.events' }, context)) as Record<string, number>;
  let failedMessages = 0;
  for (;;) {
    const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: pollQueueUrl, MaxNumberOfMessages: 10 }));
    if (Messages.length === 0) break;
    const Records = Messages.map((message) => ({ messageId: message.MessageId, body: message.Body }) as SQSRecord);
    failedMessages += (await pollWorker({ Records }, context)).batchItemFailures.length;
    for (const message of Messages)
      await sqs.send(new DeleteMessageCommand({ QueueUrl: pollQueueUrl, ReceiptHandle: message.ReceiptHandle }));
  }
  return { ...stats, failed: (stats.failed ?? 0) + failedMessages };
}

/** A Bedrock "Batch Inference Job State Change" event as EventBridge hands it to the function. */
function stateChange(jobArn: string, status: string, id = crypto.randomUUID()): BedrockJobEvent {
  return {
    version: '0',
    id,
    'detail-type': 'Batch Inference Job State Change',
    source: 'aws.bedrock',
    account: MOTO_ACCOUNT,
    time: new Date().toISOString(),
    region: MOTO_REGION,
    resources: [jobArn],
    detail: { batchJobArn: jobArn, batchJobName: 'ratchet-batch', status },
  };
}

describe('OpenAI on the AWS home', () => {
  it('ends a batch on a signed batch.completed through the API function, and writes its counts when reconcile polls it through the openai SDK', async () => {
    const batch = openaiBatch({ status: 'in_progress' });
    const id = batch.id as string;
    const name = `openai/batches/${id}`;
    openai.set('batch', batch);
    expect(await deliver('/webhooks/openai', openaiDelivery(openaiSecret, { type: 'batch.completed', id }))).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name, provider: 'openai', state: 'SUCCEEDED', resultPending: true, version: 1 } },
    });
    openai.set('batch', openaiBatch({ id, status: 'completed' }));
    expect(await run()).toMatchObject({ failed: 0 });
    const record = await get(name);
    expect(record).toMatchObject({ name, kind: 'openai-batch', state: 'SUCCEEDED', providerState: 'completed', version: 2 });
    expect(record.resultPending).toBeUndefined();
    expect(record.result).toMatchObject({ requestCounts: { total: 100, succeeded: 98, failed: 2 }, outputFileId: expect.any(String) });
    expect(openai.requests.filter((r) => r.path === `/v1/batches/${id}`).map((r) => r.apiKey)).toEqual(['sk-aws']);
  });

  it('refuses a delivery not signed with the secret the construct names (401); Azure OpenAI without its secret is 503 not-configured', async () => {
    const forged = openaiDelivery(newSecret(), { type: 'batch.completed', id: 'batch_forged' });
    expect((await deliver('/webhooks/openai', forged)).status).toBe(401);
    const azure = openaiDelivery(newSecret(), { type: 'batch.completed', id: 'batch_azure' });
    expect(await deliver('/webhooks/azure-openai', azure)).toMatchObject({ status: 503, body: { error: 'not-configured' } });
  });
});

describe('Anthropic on the AWS home', () => {
  it('polls a tracked Message Batch through @anthropic-ai/sdk with the first key of the secret, and writes its outcome', async () => {
    const batch = anthropicBatch({ processing_status: 'in_progress' });
    const name = `anthropic/messages/batches/${batch.id as string}`;
    anthropic.set(batch);
    expect((await track(name)).status).toBe(201);
    expect(await run()).toMatchObject({ failed: 0 });
    expect(await get(name)).toMatchObject({ state: 'RUNNING', providerState: 'in_progress' });
    anthropic.set(anthropicBatch({ id: batch.id as string, processing_status: 'ended' }));
    // Its next poll is due after the interval: made due now, as a later run would find it.
    const { operations: store, client } = openDynamoDb({
      endpoint: inject('dynamodbEndpoint'),
      tables: { operations: operationsTable(table) },
    });
    await store.pollNow(name, timeFromDate(new Date()));
    client.destroy();
    expect(await run()).toMatchObject({ failed: 0 });
    expect(await get(name)).toMatchObject({
      state: 'SUCCEEDED',
      providerState: 'ended',
      result: { requestCounts: { total: 10, succeeded: 9, failed: 1 } },
    });
    const keys = anthropic.requests.filter((r) => r.path === `/v1/messages/batches/${batch.id as string}`).map((r) => r.apiKey);
    expect(new Set(keys)).toEqual(new Set(['sk-ant-a']));
  });
});

describe('Bedrock on the AWS home', () => {
  it("takes a job's EventBridge state changes into the write as nudges, and its outcome from the poll through @aws-sdk/client-bedrock", async () => {
    const job = bedrockJob({ status: 'InProgress' }, { region: MOTO_REGION, account: MOTO_ACCOUNT });
    const jobArn = job.jobArn as string;
    const name = `bedrock/${MOTO_REGION}/${MOTO_ACCOUNT}/model-invocation-jobs/${jobArn.split('/').at(-1)}`;
    bedrock.set(job);
    // Never tracked: the event adopts it, and reconcile polls it (still running; its next poll a minute or more on).
    expect(await bedrockEvents(stateChange(jobArn, 'InProgress'))).toEqual({ decision: 'applied', reason: '' });
    expect(await get(name)).toMatchObject({ kind: 'bedrock-batch', provider: 'bedrock', state: 'RUNNING', source: 'webhook' });
    expect(await run()).toMatchObject({ failed: 0 });
    // Unordered: an older state after it changes nothing.
    expect(await bedrockEvents(stateChange(jobArn, 'Scheduled'))).toMatchObject({ decision: 'discarded' });
    bedrock.set({ ...bedrockJob({ status: 'Completed' }, { region: MOTO_REGION, account: MOTO_ACCOUNT }), jobArn });
    const ended = stateChange(jobArn, 'Completed');
    expect(await bedrockEvents(ended)).toEqual({ decision: 'applied', reason: '' });
    // The same event again (EventBridge delivers at least once): no second write.
    expect(await bedrockEvents(ended)).toMatchObject({ decision: 'discarded', reason: 'duplicate' });
    const bare = await get(name);
    expect(bare).toMatchObject({ state: 'SUCCEEDED', providerState: 'Completed', resultPending: true });
    // Its end made it due at once: the next run polls it and writes the outcome.
    expect(await run()).toMatchObject({ failed: 0 });
    const record = await get(name);
    expect(record).toMatchObject({
      state: 'SUCCEEDED',
      version: bare.version + 1,
      result: { outputUri: expect.stringMatching(/^s3:\/\//), requestCounts: { total: 100 } },
    });
    expect(record.resultPending).toBeUndefined();
    const polls = bedrock.requests.filter((r) => r.method === 'GET').map((r) => [decodeURIComponent(r.path), r.region]);
    expect(polls).toEqual([
      [`/model-invocation-job/${jobArn}`, MOTO_REGION],
      [`/model-invocation-job/${jobArn}`, MOTO_REGION],
    ]);
  });

  it('keeps an event that names no job for the operator, and passes over a status it cannot map yet, neither retried', async () => {
    const malformed = { ...stateChange('arn:aws:s3:::not-a-job', 'Completed'), id: `evt-${Date.now()}` };
    expect(await bedrockEvents(malformed)).toEqual({ decision: 'unprocessable', reason: 'malformed-event' });
    const { body } = await call(httpApiEvent('GET', '/decisions'));
    expect(body.decisions).toContainEqual(
      expect.objectContaining({ webhookId: malformed.id, reason: 'malformed-event', type: 'Batch Inference Job State Change' }),
    );
    const job = bedrockJob({ status: 'InProgress' }, { region: MOTO_REGION, account: MOTO_ACCOUNT });
    expect(await bedrockEvents(stateChange(job.jobArn as string, 'Paused'))).toEqual({ decision: 'ignored', reason: 'unknown-state' });
  });
});
