/**
 * Least privilege, proven before a deploy. The stack is synthesized with its
 * bundles and brought to life in moto (test/support/aws/template.ts); each
 * bundle runs with the environment the template gives it, every AWS call it
 * makes going through a recording proxy. Each recorded call, and each call
 * AWS makes on a role's behalf (logs, tracing, event source mappings, the
 * Pipe), is then simulated against that role's policies from the template,
 * with the resource's own policy where it has one: every call Allowed. The
 * other direction: every single grant (one action on one resource) is needed,
 * since deleting it from the template denies a recorded call. The service
 * side too: API Gateway's routes, the schedule and the alarms reach their
 * targets through the resource policies in the template.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteMessageCommand, ReceiveMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { runSimulation } from '@cloud-copilot/iam-simulate';
import type { DynamoDBRecord, SQSRecord } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { REDRIVEN_ATTRIBUTE } from '../../lambda/effects/sqs-retry-scheduler.ts';
import { httpApiEvent } from '../support/api-gateway.ts';
import { runBundle } from '../support/aws/lambda-host.ts';
import { MOTO_ACCOUNT, MOTO_CREDENTIALS, MOTO_REGION } from '../support/aws/moto.ts';
import { type AwsCall, RecordingProxy } from '../support/aws/recording-proxy.ts';
import { deployedEnvironment, FUNCTIONS, type FunctionName, pipeMessage, toSqsRecord } from '../support/aws/stack-on-moto.ts';
import { toLambdaRecord } from '../support/aws/stream-mapping.ts';
import { type Synthesized, synthesizeWithBundles } from '../support/aws/synth.ts';
import { type PolicyDocument, type PolicyStatement, TemplateWorld } from '../support/aws/template.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { bedrockJob, startFakeBedrock } from '../support/fake-bedrock.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { jwtDelivery, KeyServer, rsaKey } from '../support/google-keys.ts';
import { Receiver } from '../support/receiver.ts';
import { readStream } from '../support/stream-records.ts';

type Policies = Array<{ name: string; policy: PolicyDocument }>;
/** A call to simulate: who makes it (a role's logical id, or a service principal), and in what context. */
interface Check extends AwsCall {
  role?: string;
  principal?: string;
  context?: Record<string, string>;
  why: string;
}

const AUDIENCE = 'https://ratchet.example/webhooks/gemini';

let synthesized: Synthesized;
let world: TemplateWorld;
let proxy: RecordingProxy;
let motoEndpoint: string;
/** Every call the bundles made, by the role of the function that made it. */
const recorded: Check[] = [];

const client = <T>(Client: new (config: object) => T): T =>
  new Client({ endpoint: motoEndpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });

/** Every function of the stack: those the stack-on-moto tests host, and the one Bedrock's events reach. */
const ALL_FUNCTIONS = [...FUNCTIONS, 'BedrockEvents'] as const;
type AnyFunction = (typeof ALL_FUNCTIONS)[number];

/** Runs a function's bundle as deployed (its template environment, credentials from the environment) and records its calls. */
async function run(fn: AnyFunction, events: unknown[], extra: Record<string, string> = {}): Promise<unknown[]> {
  proxy.reset();
  try {
    return await runBundle(synthesized.bundleOf(fn), events, {
      ...deployedEnvironment(world, fn as FunctionName, motoEndpoint, proxy.endpoint),
      ...extra,
    });
  } finally {
    recorded.push(...proxy.calls.map((call) => ({ ...call, role: world.roleOf(fn), why: `${fn} bundle` })));
  }
}

/** The table's stream as the Pipe and the history mapping read it, in Lambda's record format. */
async function streamRecords(): Promise<DynamoDBRecord[]> {
  const table = world.logicalId('AWS::DynamoDB::Table', 'Operations');
  const streamArn = world.resolve({ 'Fn::GetAtt': [table, 'StreamArn'] }) as string;
  const dynamodb = client(DynamoDBClient);
  try {
    return (await readStream(dynamodb, motoEndpoint, String(world.resolve({ Ref: table })))).map((r) => toLambdaRecord(r, streamArn));
  } finally {
    dynamodb.destroy();
  }
}

/** The record sent to the effects queue as the template's Pipe sends it, then received as Lambda's SQS event source receives it. */
async function throughEffectsQueue(record: DynamoDBRecord, attributes: Record<string, string> = {}): Promise<SQSRecord> {
  const sqs = client(SQSClient);
  try {
    const sent = pipeMessage(world, record, attributes);
    await sqs.send(sent);
    const QueueUrl = sent.input.QueueUrl as string;
    const { Messages = [] } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl, MessageSystemAttributeNames: ['All'], MessageAttributeNames: ['All'] }),
    );
    const [message] = Messages;
    if (!message) throw new Error('the effects queue gave nothing back');
    return toSqsRecord(message, world.resolve({ 'Fn::GetAtt': [world.logicalId('AWS::SQS::Queue', 'EffectsQueue'), 'Arn'] }) as string);
  } finally {
    sqs.destroy();
  }
}

/** Every message on the poll queue, as Lambda's SQS event source hands them to the worker. */
async function fromPollQueue(): Promise<SQSRecord[]> {
  const sqs = client(SQSClient);
  try {
    const arn = world.resolve({ 'Fn::GetAtt': [world.logicalId('AWS::SQS::Queue', 'PollQueue'), 'Arn'] }) as string;
    const { Messages = [] } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: world.queueUrl(arn), MaxNumberOfMessages: 10 }));
    if (Messages.length === 0) throw new Error('the poll queue gave nothing back');
    return Messages.map((message) => toSqsRecord(message, arn));
  } finally {
    sqs.destroy();
  }
}

async function acknowledge(message: SQSRecord): Promise<void> {
  const sqs = client(SQSClient);
  await sqs.send(new DeleteMessageCommand({ QueueUrl: world.queueUrl(message.eventSourceARN), ReceiptHandle: message.receiptHandle }));
  sqs.destroy();
}

beforeAll(async () => {
  motoEndpoint = inject('dynamodbEndpoint');
  // The EventBridge sink on (it is off unless asked for), so its grant is simulated too.
  synthesized = synthesizeWithBundles({ eventBridgeSink: true });
  world = new TemplateWorld(synthesized.template, motoEndpoint, `iam${Date.now().toString(36)}`);
  await world.provision();
  proxy = await new RecordingProxy(motoEndpoint).start();
}, 120_000);
afterAll(async () => {
  await proxy?.stop();
  synthesized?.remove();
});

describe('IAM, simulated against the synthesized template', () => {
  const webhookSecret = newSecret();
  const effectsSecret = newSecret();
  const succeeded = `batches/iam-${Date.now()}`;
  const tracked = `batches/iam-tracked-${Date.now()}`;

  it('the API bundle: signed and JWT-signed webhooks, track, read, list, history', async () => {
    await world.putSecret('WebhookSigningSecrets', webhookSecret);
    const key = rsaKey();
    const keys = await new KeyServer(key).start();
    try {
      const signed = signedDelivery(webhookSecret, envelope('batch.succeeded', { id: succeeded }));
      const jwt = await jwtDelivery(key, envelope('batch.succeeded', { id: `batches/iam-jwt-${Date.now()}` }), { audience: AUDIENCE });
      const json = { 'content-type': 'application/json' };
      const unusable = signedDelivery(webhookSecret, envelope('batch.succeeded', { id: 'batches/../files/x' }), { id: 'msg_iam_unusable' });
      const answers = (await run(
        'Api',
        [
          httpApiEvent('POST', '/webhooks/gemini', signed.body, signed.headers),
          httpApiEvent('POST', '/webhooks/gemini', jwt.body, jwt.headers),
          httpApiEvent('POST', '/operations', JSON.stringify({ name: tracked }), json),
          httpApiEvent('GET', `/operations/${succeeded}`),
          httpApiEvent('GET', '/operations'),
          httpApiEvent('GET', `/operations/${succeeded}/history`),
          // An authentic delivery that can never be used: 200, kept in the table, listed.
          httpApiEvent('POST', '/webhooks/gemini', unusable.body, unusable.headers),
          httpApiEvent('GET', '/decisions'),
        ],
        { GEMINI_WEBHOOK_KEYS_URL: keys.url, GEMINI_WEBHOOK_AUDIENCE: AUDIENCE },
      )) as Array<{ statusCode: number; body: string }>;
      expect(answers.map((answer) => [answer.statusCode, JSON.parse(answer.body).error])).toEqual([
        [200, undefined],
        [200, undefined],
        [201, undefined],
        [200, undefined],
        [200, undefined],
        [200, undefined],
        [200, undefined],
        [200, undefined],
      ]);
      expect(JSON.parse(answers[6]?.body ?? '{}')).toMatchObject({ applied: false, reason: 'unprocessable' });
      expect(JSON.parse(answers[7]?.body ?? '{}').decisions).toEqual([
        expect.objectContaining({ webhookId: 'msg_iam_unusable', reason: 'invalid-name', type: 'batch.succeeded' }),
      ]);
    } finally {
      await keys.stop();
    }
    expect(recorded.filter((call) => call.why === 'Api bundle').map((call) => call.action)).toEqual(
      expect.arrayContaining(['secretsmanager:GetSecretValue', 'dynamodb:UpdateItem', 'lambda:InvokeFunction', 'dynamodb:Query']),
    );
  });

  it('the history bundle: the write from the stream, the entry and the latest item; then the API lists it from there', async () => {
    const records = (await streamRecords()).filter((r) => r.dynamodb?.Keys?.name?.S === succeeded);
    expect(records).toHaveLength(1);
    expect(await run('HistoryWriter', [{ Records: records }])).toEqual([{ batchItemFailures: [] }]);
    expect(recorded.filter((call) => call.why === 'HistoryWriter bundle').map((call) => call.action)).toEqual([
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
    ]);
    // GET /operations reads the history table's list index, then the operations' views from the table.
    const [answer] = (await run('Api', [httpApiEvent('GET', '/operations?state=SUCCEEDED')])) as Array<{
      statusCode: number;
      body: string;
    }>;
    expect(JSON.parse(answer?.body ?? '{}').operations.map((operation: { name: string }) => operation.name)).toContain(succeeded);
    const listed = proxy.calls.map((call) => [call.action, call.resource.replace(/^.*:table\/[^/]+/, 'table')]);
    expect(listed).toEqual(
      expect.arrayContaining([
        ['dynamodb:Query', 'table/index/recent-operations'],
        ['dynamodb:BatchGetItem', 'table'],
      ]),
    );
  });

  it('the effects bundle: delivered, then a receiver outage (backoff), then a transition past its retry window (dead-lettered)', async () => {
    await world.putSecret('EffectsSigningSecret', effectsSecret);
    const receiver = await new Receiver(effectsSecret).start();
    try {
      await world.putSecret('EffectsWebhookUrl', receiver.url);
      const [record] = (await streamRecords()).filter((r) => r.dynamodb?.NewImage?.name?.S === succeeded);
      const message = await throughEffectsQueue(record as DynamoDBRecord);
      expect(await run('Effects', [{ Records: [message] }])).toEqual([{ batchItemFailures: [] }]);
      expect(receiver.accepted.map((delivery) => delivery.body.data.name)).toEqual([succeeded]);
      await acknowledge(message); // as the event source does with a message not reported failed

      receiver.mode = 'fail';
      const failing = { ...(record as DynamoDBRecord), eventID: `${record?.eventID}-again` };
      const image = (failing.dynamodb as { NewImage: Record<string, { S?: string; N?: string }> }).NewImage;
      // A later change of the job (a state before it): its effect asks the dead letters first (Query).
      Object.assign(image, { version: { N: '7' }, previousState: { S: 'RUNNING' } });
      const retried = await throughEffectsQueue(failing);
      const old = {
        ...retried,
        attributes: { ...retried.attributes, ApproximateFirstReceiveTimestamp: String(Date.now() - 3 * 86_400_000) },
      };
      const results = await run('Effects', [{ Records: [retried] }, { Records: [old] }], { EFFECTS_RETRY_FOR_SECONDS: '86400' });
      expect(results).toEqual([{ batchItemFailures: [{ itemIdentifier: retried.messageId }] }, { batchItemFailures: [] }]);
      await acknowledge(old);

      // `npm run aws -- redrive --stack` sends the dead letter again, marked: delivered, its dead letter removed.
      receiver.mode = 'ok';
      const redriven = await throughEffectsQueue({ ...failing, eventID: `${record?.eventID}-redriven` }, { [REDRIVEN_ATTRIBUTE]: 'true' });
      expect(await run('Effects', [{ Records: [redriven] }])).toEqual([{ batchItemFailures: [] }]);
      expect(receiver.accepted.map((delivery) => delivery.body.data.version)).toEqual([expect.any(Number), 7]);
    } finally {
      await receiver.stop();
    }
    const actions = new Set(recorded.filter((call) => call.why === 'Effects bundle').map((call) => call.action));
    expect([...actions].sort()).toEqual(
      expect.arrayContaining([
        'sqs:ChangeMessageVisibility',
        'dynamodb:PutItem',
        'dynamodb:Query',
        'dynamodb:DeleteItem',
        'events:PutEvents',
      ]),
    );
  });

  it('the reconcile bundles: the dispatcher hands the tracked operation to the poll queue, the worker polls it through the fake Gemini; the dispatcher marks it overdue past its limit', async () => {
    await world.putSecret('GeminiApiKey', 'iam-key');
    const gemini = await new FakeGemini('iam-key').start();
    gemini.batches.set(tracked, { state: 'BATCH_STATE_RUNNING', updateTime: new Date().toISOString() });
    try {
      const [stats] = await run('Reconcile', [{}], { GEMINI_BASE_URL: gemini.baseUrl });
      expect(stats).toMatchObject({ failed: 0 });
      expect((stats as { dispatched: number }).dispatched).toBeGreaterThanOrEqual(1);
      const messages = await fromPollQueue();
      expect(await run('PollWorker', [{ Records: messages }], { GEMINI_BASE_URL: gemini.baseUrl })).toEqual([{ batchItemFailures: [] }]);
      expect(gemini.requests).toContain(tracked);
      // Observed now (RUNNING) and open past a limit of a second: the next run finds it by age and marks it overdue.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      const [later] = await run('Reconcile', [{}], { GEMINI_BASE_URL: gemini.baseUrl, OVERDUE_AFTER: 'batch=1s' });
      expect(later).toMatchObject({ failed: 0, overdue: 1 });
    } finally {
      await gemini.stop();
    }
    expect(recorded.filter((call) => call.why === 'Reconcile bundle').map((call) => call.action)).toEqual(
      expect.arrayContaining(['sqs:GetQueueAttributes', 'sqs:SendMessage', 'dynamodb:Query', 'dynamodb:GetItem', 'dynamodb:UpdateItem']),
    );
    expect(recorded.filter((call) => call.why === 'PollWorker bundle').map((call) => call.action)).toEqual(
      expect.arrayContaining(['secretsmanager:GetSecretValue', 'dynamodb:UpdateItem']),
    );
  });

  it("the Bedrock events bundle and the reconcile bundles: a job's state change from the default bus, then its poll through the fake Bedrock", async () => {
    const bedrock = await startFakeBedrock({ account: MOTO_ACCOUNT });
    try {
      const job = bedrockJob({ status: 'Completed' }, { region: MOTO_REGION, account: MOTO_ACCOUNT });
      bedrock.set(job);
      const jobArn = job.jobArn as string;
      const event = {
        version: '0',
        id: `iam-${Date.now()}`,
        'detail-type': 'Batch Inference Job State Change',
        source: 'aws.bedrock',
        account: MOTO_ACCOUNT,
        time: new Date().toISOString(),
        region: MOTO_REGION,
        resources: [jobArn],
        detail: { batchJobArn: jobArn, batchJobName: 'iam', status: 'Completed' },
      };
      expect(await run('BedrockEvents', [event])).toEqual([{ decision: 'applied', reason: '' }]);
      await run('Reconcile', [{}]);
      const messages = await fromPollQueue();
      const [answer] = await run('PollWorker', [{ Records: messages }], { AWS_ENDPOINT_URL_BEDROCK: bedrock.url });
      // Bedrock's calls went to the fake, not through the proxy: recorded from its log, as IAM would authorize them.
      const polls = bedrock.requests.filter((request) => request.method === 'GET');
      expect({ answer, polls: polls.map((request) => decodeURIComponent(request.path)) }).toMatchObject({
        answer: { batchItemFailures: [] },
        polls: [`/model-invocation-job/${jobArn}`],
      });
      recorded.push(
        ...polls.map((request) => ({
          action: 'bedrock:GetModelInvocationJob',
          resource: decodeURIComponent(request.path.replace('/model-invocation-job/', '')),
          role: world.roleOf('PollWorker'),
          why: 'PollWorker bundle (Bedrock)',
        })),
      );
    } finally {
      await bedrock.close();
    }
    expect(recorded.filter((call) => call.why === 'BedrockEvents bundle').map((call) => call.action)).toEqual(
      expect.arrayContaining(['dynamodb:UpdateItem']),
    );
    // The worker's grant is this account's and region's jobs: another's job, or a list, is denied; the dispatcher has none.
    const worker = world.roleOf('PollWorker');
    const asked = (action: string, resource: string, role = worker) =>
      simulate({ action, resource, role, why: 'Bedrock bounds' }, world.rolePolicies(role));
    const other = (region: string, account: string) => `arn:aws:bedrock:${region}:${account}:model-invocation-job/abc`;
    expect(await asked('bedrock:GetModelInvocationJob', other('eu-west-1', MOTO_ACCOUNT))).toBe('ImplicitlyDenied');
    expect(await asked('bedrock:GetModelInvocationJob', other(MOTO_REGION, '210987654321'))).toBe('ImplicitlyDenied');
    expect(await asked('bedrock:StopModelInvocationJob', other(MOTO_REGION, MOTO_ACCOUNT))).toBe('ImplicitlyDenied');
    expect(await asked('bedrock:GetModelInvocationJob', other(MOTO_REGION, MOTO_ACCOUNT), world.roleOf('Reconcile'))).toBe(
      'ImplicitlyDenied',
    );
  });

  it('the dispatcher may send to its poll queue and no other; the worker may read its keys and no other secret', async () => {
    const dispatcher = world.roleOf('Reconcile');
    const worker = world.roleOf('PollWorker');
    const queue = (id: string) => world.resolve({ 'Fn::GetAtt': [world.logicalId('AWS::SQS::Queue', id), 'Arn'] }) as string;
    const secret = (id: string) => world.resolve({ Ref: world.logicalId('AWS::SecretsManager::Secret', id) }) as string;
    const may = (role: string, action: string, resource: string) =>
      simulate({ action, resource, role, why: 'bounds' }, world.rolePolicies(role));
    expect(await may(dispatcher, 'sqs:SendMessage', queue('PollQueue'))).toBe('Allowed');
    expect(await may(dispatcher, 'sqs:SendMessage', queue('EffectsQueue'))).toBe('ImplicitlyDenied');
    expect(await may(worker, 'sqs:SendMessage', queue('PollQueue'))).toBe('ImplicitlyDenied');
    expect(await may(worker, 'secretsmanager:GetSecretValue', secret('GeminiApiKey'))).toBe('Allowed');
    expect(await may(worker, 'secretsmanager:GetSecretValue', secret('WebhookSigningSecrets'))).toBe('ImplicitlyDenied');
  });

  it('every call, the bundles’ and those AWS makes for a role, is allowed by that role’s policies and the resource’s policy', async () => {
    const checks = [...recorded, ...onBehalfOfRoles()];
    expect(recorded.filter((call) => call.action.startsWith('unrecognized'))).toEqual([]);
    const denied = [];
    for (const check of checks) {
      const result = await simulate(check, check.role ? world.rolePolicies(check.role) : []);
      if (result !== 'Allowed') denied.push({ ...check, result });
    }
    expect(denied).toEqual([]);
  });

  it('every grant is needed: deleting any one action on any one resource from a role denies a call', async () => {
    const checks = [...recorded, ...onBehalfOfRoles()];
    const roles = [...new Set(checks.flatMap((check) => check.role ?? []))];
    expect(roles).toHaveLength(ALL_FUNCTIONS.length + 1); // the functions' roles and the Pipe's
    const unneeded = [];
    for (const role of roles) {
      const policies = world.rolePolicies(role);
      for (const [p, { policy }] of policies.entries()) {
        for (const [s, statement] of policy.Statement.entries()) {
          for (const action of list(statement.Action)) {
            for (const resource of list(statement.Resource)) {
              const without = structuredClone(policies);
              (without[p] as { policy: PolicyDocument }).policy.Statement.splice(s, 1, ...withoutGrant(statement, action, resource));
              const affected = checks.filter((check) => check.role === role && check.action.toLowerCase() === action.toLowerCase());
              const results = await Promise.all(affected.map((check) => simulate(check, without)));
              if (!results.some((result) => result !== 'Allowed')) unneeded.push({ role, action, resource });
            }
          }
        }
      }
    }
    expect(unneeded).toEqual([]);
  });
});

describe('the service side, simulated against the template’s resource policies', () => {
  it('API Gateway may invoke the API function on every route, and on no other path', async () => {
    const routes = world.ofType('AWS::ApiGatewayV2::Route').map(([, route]) => String(route.Properties.RouteKey));
    expect(routes.length).toBeGreaterThanOrEqual(5);
    const api = world.resolve({ Ref: world.logicalId('AWS::ApiGatewayV2::Api', 'HttpApi') });
    const fn = world.arnOf(world.logicalId('AWS::Lambda::Function', 'Api'));
    const invoke = (routeKey: string) => {
      const [method, path] = routeKey.split(' ');
      return simulate(
        {
          action: 'lambda:InvokeFunction',
          resource: fn,
          principal: 'apigateway.amazonaws.com',
          context: { 'aws:SourceArn': `arn:aws:execute-api:${MOTO_REGION}:${MOTO_ACCOUNT}:${api}/$default/${method}${path}` },
          why: routeKey,
        },
        [],
      );
    };
    for (const route of routes) expect({ route, result: await invoke(route) }).toEqual({ route, result: 'Allowed' });
    expect(await invoke('GET /admin')).toBe('ImplicitlyDenied');
  });

  it('the rule on the default bus may invoke the Bedrock events function; another rule may not', async () => {
    const rule = world.logicalId('AWS::Events::Rule', 'BedrockJobStateChanges');
    const fn = world.arnOf(world.logicalId('AWS::Lambda::Function', 'BedrockEvents'));
    const targets = world.resource(rule).Properties.Targets as Array<{ Arn: unknown }>;
    expect(targets.map((target) => world.resolve(target.Arn))).toEqual([fn]);
    const invoke = (sourceArn: string) =>
      simulate(
        {
          action: 'lambda:InvokeFunction',
          resource: fn,
          principal: 'events.amazonaws.com',
          context: { 'aws:SourceArn': sourceArn },
          why: rule,
        },
        [],
      );
    expect(await invoke(world.arnOf(rule))).toBe('Allowed');
    expect(await invoke(world.arnOf(world.logicalId('AWS::Events::Rule', 'ReconcileSchedule')))).toBe('ImplicitlyDenied');
  });

  it('the schedule may invoke reconcile’s dispatcher; another rule may not', async () => {
    const rule = world.logicalId('AWS::Events::Rule', 'ReconcileSchedule');
    const fn = world.arnOf(world.logicalId('AWS::Lambda::Function', 'Reconcile'));
    const targets = world.resource(rule).Properties.Targets as Array<{ Arn: unknown }>;
    expect(targets.map((target) => world.resolve(target.Arn))).toEqual([fn]);
    const invoke = (sourceArn: string) =>
      simulate(
        {
          action: 'lambda:InvokeFunction',
          resource: fn,
          principal: 'events.amazonaws.com',
          context: { 'aws:SourceArn': sourceArn },
          why: rule,
        },
        [],
      );
    expect(await invoke(world.arnOf(rule))).toBe('Allowed');
    expect(await invoke(`arn:aws:events:${MOTO_REGION}:${MOTO_ACCOUNT}:rule/another`)).toBe('ImplicitlyDenied');
  });

  it('every alarm may publish to the alarms topic (over TLS, from this account), which SNS’s default policy no longer allows once a topic policy exists', async () => {
    const topicId = world.logicalId('AWS::SNS::Topic', 'MonitoringTopic');
    const topic = world.resolve({ Ref: topicId }) as string;
    // Not encrypted with a KMS key: CloudWatch could not publish to a topic under the AWS-managed key, and a key policy would need the same grant.
    expect(world.resource(topicId).Properties.KmsMasterKeyId).toBeUndefined();
    const alarms = world.ofType('AWS::CloudWatch::Alarm');
    expect(alarms.length).toBeGreaterThan(10);
    const publish = (alarm: string, policy = topicPolicyOf(topicId), secure = 'true') =>
      simulate(
        {
          action: 'sns:Publish',
          resource: topic,
          principal: 'cloudwatch.amazonaws.com',
          context: {
            'aws:SourceArn': `arn:aws:cloudwatch:${MOTO_REGION}:${MOTO_ACCOUNT}:alarm:${alarm}`,
            'aws:SourceAccount': MOTO_ACCOUNT,
            'aws:SecureTransport': secure,
          },
          why: alarm,
        },
        [],
        policy,
      );
    for (const [id, alarm] of alarms) {
      expect(world.resolve(alarm.Properties.AlarmActions)).toEqual([topic]);
      const name = String(world.resolve(alarm.Properties.AlarmName));
      expect({ id, result: await publish(name) }).toEqual({ id, result: 'Allowed' });
    }
    const [, first] = alarms[0] as [string, { Properties: Record<string, unknown> }];
    const name = String(world.resolve(first.Properties.AlarmName));
    expect(await publish(name, topicPolicyOf(topicId), 'false')).toBe('ExplicitlyDenied');
    const sslOnly = topicPolicyOf(topicId);
    sslOnly.Statement = sslOnly.Statement.filter((statement) => statement.Effect === 'Deny');
    expect(await publish(name, sslOnly)).toBe('ImplicitlyDenied');
  });
});

const list = <T>(value: T | T[]): T[] => (Array.isArray(value) ? value : [value]);

/** The statement without `action` on `resource`: its other actions on all its resources, and `action` on its other resources. */
function withoutGrant(statement: PolicyStatement, action: string, resource: string): PolicyStatement[] {
  const actions = list(statement.Action).filter((a) => a !== action);
  const resources = list(statement.Resource).filter((r) => r !== resource);
  return [
    ...(actions.length ? [{ ...statement, Action: actions }] : []),
    ...(resources.length ? [{ ...statement, Action: action, Resource: resources }] : []),
  ];
}

function topicPolicyOf(topicId: string): PolicyDocument {
  const [, policy] = world
    .ofType('AWS::SNS::TopicPolicy')
    .find(([, p]) => (p.Properties.Topics as Array<{ Ref?: string }>).some((t) => t.Ref === topicId)) as [
    string,
    { Properties: Record<string, unknown> },
  ];
  return world.resolve(policy.Properties.PolicyDocument) as PolicyDocument;
}

/** The resource policy IAM evaluates a call against: a queue's, or a function's (its Lambda permissions). */
function resourcePolicyOf(resource: string): PolicyDocument | undefined {
  for (const [, queuePolicy] of world.ofType('AWS::SQS::QueuePolicy')) {
    const queues = (queuePolicy.Properties.Queues as unknown[]).map((queue) => world.resolve(queue));
    if (queues.some((url) => String(url).endsWith(`/${resource.split(':').pop()}`)) && resource.startsWith('arn:aws:sqs:'))
      return world.resolve(queuePolicy.Properties.PolicyDocument) as PolicyDocument;
  }
  const permissions = world
    .ofType('AWS::Lambda::Permission')
    .filter(([, permission]) => world.resolve(permission.Properties.FunctionName) === resource);
  if (!permissions.length) return undefined;
  // As Lambda writes a permission into the function's policy.
  return {
    Version: '2012-10-17',
    Statement: permissions.map(([, { Properties: p }]) => ({
      Effect: 'Allow',
      Principal: { Service: p.Principal },
      Action: String(p.Action),
      Resource: resource,
      ...(p.SourceArn !== undefined && { Condition: { ArnLike: { 'AWS:SourceArn': world.resolve(p.SourceArn) } } }),
    })),
  } as PolicyDocument;
}

async function simulate(check: Check, identityPolicies: Policies, resourcePolicy = resourcePolicyOf(check.resource)): Promise<string> {
  const principal = check.role ? world.arnOf(check.role) : (check.principal as string);
  const result = await runSimulation(
    {
      identityPolicies,
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(resourcePolicy && { resourcePolicy }),
      request: {
        principal,
        action: check.action,
        resource: { resource: check.resource, accountId: MOTO_ACCOUNT },
        contextVariables: { 'aws:SecureTransport': 'true', ...check.context },
      },
    },
    {},
  );
  if (result.resultType === 'error') throw new Error(`simulating ${check.action} on ${check.resource}: ${JSON.stringify(result.errors)}`);
  if (result.resultType !== 'single') throw new Error(`simulating ${check.action} on ${check.resource}: a wildcard resource`);
  return result.overallResult;
}

/**
 * The calls AWS makes with a role's credentials rather than the bundle: the
 * function's logs and traces, its event source mappings (reading the source,
 * sending to the on-failure destination), and the Pipe (reading the stream,
 * sending to its target and its dead-letter queue). Each as AWS documents
 * the permissions that service needs, on the resources the template wires.
 */
function onBehalfOfRoles(): Check[] {
  const checks: Check[] = [];
  const streamReads = (role: string, streamArn: string, why: string): Check[] => [
    ...['DescribeStream', 'GetRecords', 'GetShardIterator'].map((action) => ({
      role,
      action: `dynamodb:${action}`,
      resource: streamArn,
      why,
    })),
    { role, action: 'dynamodb:ListStreams', resource: '*', why },
  ];
  for (const fn of ALL_FUNCTIONS) {
    const id = world.logicalId('AWS::Lambda::Function', fn);
    const role = world.roleOf(fn);
    const props = world.resource(id).Properties as {
      LoggingConfig: { LogGroup: unknown };
      TracingConfig?: { Mode: string };
    };
    const logGroup = world.resolve({ 'Fn::GetAtt': [(props.LoggingConfig.LogGroup as { Ref: string }).Ref, 'Arn'] }) as string;
    const logStream = `${logGroup.replace(/:\*$/, '')}:log-stream:2026/12/04/[$LATEST]0123456789abcdef`;
    for (const action of ['logs:CreateLogStream', 'logs:PutLogEvents'])
      checks.push({ role, action, resource: logStream, why: `${fn} logs` });
    if (props.TracingConfig?.Mode === 'Active')
      for (const action of ['xray:PutTraceSegments', 'xray:PutTelemetryRecords'])
        checks.push({ role, action, resource: '*', why: `${fn} traces` });
    for (const [mappingId, mapping] of world.ofType('AWS::Lambda::EventSourceMapping')) {
      if (world.resolve(mapping.Properties.FunctionName) !== world.resolve({ Ref: id })) continue;
      const source = String(world.resolve(mapping.Properties.EventSourceArn));
      if (source.startsWith('arn:aws:sqs:'))
        for (const action of ['ReceiveMessage', 'DeleteMessage', 'GetQueueAttributes'])
          checks.push({ role, action: `sqs:${action}`, resource: source, why: mappingId });
      else checks.push(...streamReads(role, source, mappingId));
      const onFailure = (mapping.Properties.DestinationConfig as { OnFailure?: { Destination: unknown } } | undefined)?.OnFailure;
      if (onFailure)
        checks.push({ role, action: 'sqs:SendMessage', resource: String(world.resolve(onFailure.Destination)), why: mappingId });
    }
  }
  for (const [pipeId, pipe] of world.ofType('AWS::Pipes::Pipe')) {
    const role = (pipe.Properties.RoleArn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    const source = pipe.Properties.SourceParameters as { DynamoDBStreamParameters: { DeadLetterConfig: { Arn: unknown } } };
    checks.push(...streamReads(role, String(world.resolve(pipe.Properties.Source)), pipeId));
    for (const queue of [pipe.Properties.Target, source.DynamoDBStreamParameters.DeadLetterConfig.Arn])
      checks.push({ role, action: 'sqs:SendMessage', resource: String(world.resolve(queue)), why: pipeId });
  }
  return checks;
}
