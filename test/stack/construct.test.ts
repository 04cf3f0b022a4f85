/**
 * The `Ratchet` construct as an application uses it: a consumer stack of its
 * own (a function of the app's, a queue) that adds Ratchet and calls every
 * method: grantTrack, grantRead, onStateChange. Checked on the synthesized
 * template: the rule's pattern, the grants, and (simulated with
 * @cloud-copilot/iam-simulate) that the grants allow exactly their routes.
 */
import { runSimulation } from '@cloud-copilot/iam-simulate';
import { App, type CfnElement, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { LambdaFunction, SqsQueue } from 'aws-cdk-lib/aws-events-targets';
import { Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Code, Function as LambdaFn, Runtime } from 'aws-cdk-lib/aws-lambda';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { EVENTBRIDGE_DETAIL_TYPE, EVENTBRIDGE_OVERDUE_DETAIL_TYPE, EVENTBRIDGE_SOURCE } from '../../lambda/effects/settings.ts';
import { Ratchet } from '../../lib/ratchet.ts';
import type { PolicyDocument } from '../support/aws/template.ts';

const ACCOUNT = '123456789012';
const REGION = 'eu-west-1';
const API_ID = 'a1b2c3d4e5';

function consumerApp() {
  const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
  const stack = new Stack(app, 'MyApp', { env: { account: ACCOUNT, region: REGION } });
  const ratchet = new Ratchet(stack, 'Ratchet');
  // The app's own code: one function tracks and reads jobs, another only reads, a third reacts to changes.
  const inline = (name: string) =>
    new LambdaFn(stack, name, { runtime: Runtime.NODEJS_24_X, handler: 'index.handler', code: Code.fromInline('export {}') });
  const submitter = inline('Submitter');
  const dashboard = inline('Dashboard');
  const onBatchDone = inline('OnBatchDone');
  const audit = new Queue(stack, 'Audit');
  ratchet.grantTrack(submitter);
  ratchet.grantRead(submitter);
  ratchet.grantRead(dashboard);
  ratchet.onStateChange('BatchDone', new LambdaFunction(onBatchDone), { kinds: ['batch'], states: ['SUCCEEDED', 'FAILED'] });
  ratchet.onStateChange('AllChanges', new SqsQueue(audit));
  ratchet.onStateChange('OneJob', new SqsQueue(audit), { names: ['batches/abc'] });
  ratchet.onOverdue('LateBatches', new SqsQueue(audit), { kinds: ['batch', 'platform-batch'] });
  return { app, stack, ratchet };
}

let template: Template;
let ratchet: Ratchet;

beforeAll(() => {
  const consumer = consumerApp();
  ratchet = consumer.ratchet;
  template = Template.fromStack(consumer.stack);
});

/** The identity policy CDK attached to the role of the function whose logical id starts with `prefix`, references resolved. */
function policyOf(prefix: string) {
  const policies = Object.values(template.findResources('AWS::IAM::Policy')).filter((p) =>
    p.Properties.Roles.some((r: { Ref: string }) => r.Ref.startsWith(prefix)),
  );
  return policies.map((p) => ({ name: p.Properties.PolicyName as string, policy: resolve(p.Properties.PolicyDocument) as PolicyDocument }));
}

/** CloudFormation's references in this template, resolved as a deploy in ACCOUNT / REGION would. */
function resolve(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(resolve);
  if (value && typeof value === 'object') {
    const object = value as Record<string, unknown>;
    if ('Ref' in object) {
      const ref = String(object.Ref);
      if (ref === 'AWS::Partition') return 'aws';
      if (ref === 'AWS::Region') return REGION;
      if (ref === 'AWS::AccountId') return ACCOUNT;
      const type = template.toJSON().Resources[ref]?.Type;
      if (type === 'AWS::ApiGatewayV2::Api') return API_ID;
      if (type === 'AWS::SecretsManager::Secret') return `arn:aws:secretsmanager:${REGION}:${ACCOUNT}:secret:${ref}-AbCdEf`;
      throw new Error(`no physical id for ${ref}`);
    }
    if ('Fn::GetAtt' in object) {
      const [id, attribute] = object['Fn::GetAtt'] as [string, string];
      const type = template.toJSON().Resources[id]?.Type;
      if (type === 'AWS::DynamoDB::Table' && attribute === 'Arn') return `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${id}`;
      if (type === 'AWS::Lambda::Function' && attribute === 'Arn') return `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${id}`;
      if (type === 'AWS::Logs::LogGroup' && attribute === 'Arn') return `arn:aws:logs:${REGION}:${ACCOUNT}:log-group:${id}:*`;
      if (type === 'AWS::SQS::Queue' && attribute === 'Arn') return `arn:aws:sqs:${REGION}:${ACCOUNT}:${id}`;
      throw new Error(`no value for ${id}.${attribute}`);
    }
    if ('Fn::Join' in object) {
      const [separator, parts] = object['Fn::Join'] as [string, unknown[]];
      return (resolve(parts) as string[]).join(separator);
    }
    return Object.fromEntries(Object.entries(object).map(([key, inner]) => [key, resolve(inner)]));
  }
  return value;
}

/** Whether the role whose logical id starts with `prefix` may do `action` on `resource`, as IAM would judge it. */
async function allowed(prefix: string, action: string, resource: string): Promise<boolean> {
  const result = await runSimulation(
    {
      identityPolicies: policyOf(prefix),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      request: {
        principal: `arn:aws:iam::${ACCOUNT}:role/${prefix}`,
        action,
        resource: { resource, accountId: ACCOUNT },
        contextVariables: {},
      },
    },
    {},
  );
  if (result.resultType !== 'single') throw new Error(`simulation: ${JSON.stringify(result)}`);
  return result.overallResult === 'Allowed';
}

async function invokeAllowed(prefix: string, method: string, path: string): Promise<boolean> {
  const result = await runSimulation(
    {
      identityPolicies: policyOf(prefix),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      request: {
        principal: `arn:aws:iam::${ACCOUNT}:role/${prefix}`,
        action: 'execute-api:Invoke',
        resource: { resource: `arn:aws:execute-api:${REGION}:${ACCOUNT}:${API_ID}/$default/${method}${path}`, accountId: ACCOUNT },
        contextVariables: {},
      },
    },
    {},
  );
  if (result.resultType !== 'single') throw new Error(`simulation: ${JSON.stringify(result)}`);
  return result.overallResult === 'Allowed';
}

describe('the Ratchet construct in an application’s own stack', () => {
  it('sends the matching state changes on Ratchet’s bus to any target', () => {
    const bus = { Ref: Match.stringLikeRegexp('^RatchetEvents') };
    template.hasResourceProperties('AWS::Events::Rule', {
      EventBusName: bus,
      EventPattern: {
        source: [EVENTBRIDGE_SOURCE],
        'detail-type': [EVENTBRIDGE_DETAIL_TYPE],
        detail: { kind: ['batch'], state: ['SUCCEEDED', 'FAILED'] },
      },
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^OnBatchDone'), 'Arn'] } })],
    });
    template.hasResourceProperties('AWS::Events::Rule', {
      EventBusName: bus,
      EventPattern: { source: [EVENTBRIDGE_SOURCE], 'detail-type': [EVENTBRIDGE_DETAIL_TYPE], detail: Match.absent() },
    });
    template.hasResourceProperties('AWS::Events::Rule', {
      EventBusName: bus,
      EventPattern: Match.objectLike({ detail: { name: ['batches/abc'] } }),
    });
    // The target may be invoked by that rule, and by nothing else.
    template.hasResourceProperties('AWS::Lambda::Permission', {
      FunctionName: { 'Fn::GetAtt': [Match.stringLikeRegexp('^OnBatchDone'), 'Arn'] },
      Principal: 'events.amazonaws.com',
      SourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^RatchetBatchDone'), 'Arn'] },
    });
  });

  it('sends the jobs found overdue (their own detail type) to the onOverdue target, never to a state-change rule', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: [EVENTBRIDGE_SOURCE],
        'detail-type': [EVENTBRIDGE_OVERDUE_DETAIL_TYPE],
        detail: { kind: ['batch', 'platform-batch'] },
      },
    });
    const rules = Object.values(template.findResources('AWS::Events::Rule'));
    const types = rules.flatMap((rule) => rule.Properties.EventPattern?.['detail-type'] ?? []);
    expect(types.filter((type) => type === EVENTBRIDGE_OVERDUE_DETAIL_TYPE)).toHaveLength(1);
    expect(EVENTBRIDGE_OVERDUE_DETAIL_TYPE).not.toBe(EVENTBRIDGE_DETAIL_TYPE);
  });

  it('refuses an empty filter list, which would silently match nothing', () => {
    expect(() => ratchet.onStateChange('Never', new SqsQueue(new Queue(Stack.of(ratchet), 'Q')), { states: [] })).toThrow(
      /empty state list would match nothing/,
    );
  });

  it('grantTrack allows POST /operations only; grantRead the GET routes only; neither the webhook', async () => {
    const routes: Array<[string, string]> = [
      ['POST', '/operations'],
      ['GET', '/operations'],
      ['GET', '/operations/batches/abc'],
      ['GET', '/operations/batches/abc/history'],
      ['POST', '/webhooks/gemini'],
      ['GET', '/healthz'],
      ['DELETE', '/operations/batches/abc'],
      ['POST', '/operations/batches/abc'],
    ];
    const allowed = async (prefix: string) =>
      (
        await Promise.all(routes.map(async ([method, path]) => ((await invokeAllowed(prefix, method, path)) ? `${method} ${path}` : null)))
      ).filter(Boolean);
    expect(await allowed('Submitter')).toEqual([
      'POST /operations',
      'GET /operations',
      'GET /operations/batches/abc',
      'GET /operations/batches/abc/history',
    ]);
    expect(await allowed('Dashboard')).toEqual(['GET /operations', 'GET /operations/batches/abc', 'GET /operations/batches/abc/history']);
    expect(await allowed('OnBatchDone')).toEqual([]);
  });

  it('gives the app’s functions nothing of Ratchet beyond execute-api:Invoke', () => {
    for (const prefix of ['Submitter', 'Dashboard']) {
      const actions = policyOf(prefix).flatMap(({ policy }) => policy.Statement.flatMap((statement) => [statement.Action].flat()));
      expect(new Set(actions)).toEqual(new Set(['execute-api:Invoke']));
    }
  });

  it('exposes the API URL, the webhook URL, the bus, the tables and the alarms topic', () => {
    const stack = Stack.of(ratchet);
    expect(stack.resolve(ratchet.apiUrl)).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^RatchetHttpApi/), 'ApiEndpoint'] });
    expect(JSON.stringify(stack.resolve(ratchet.webhookUrl))).toMatch(/\/webhooks\/gemini/);
    expect(JSON.stringify(stack.resolve(ratchet.openaiWebhookUrl))).toMatch(/\/webhooks\/openai"/);
    expect(JSON.stringify(stack.resolve(ratchet.azureOpenAIWebhookUrl))).toMatch(/\/webhooks\/azure-openai"/);
    expect(stack.resolve(ratchet.bus.eventBusName)).toEqual({ Ref: expect.stringMatching(/^RatchetEvents/) });
    expect(stack.resolve(ratchet.table.tableName)).toEqual({ Ref: expect.stringMatching(/^RatchetOperations/) });
    expect(stack.resolve(ratchet.historyTable.tableName)).toEqual({ Ref: expect.stringMatching(/^RatchetHistory/) });
    expect(stack.resolve(ratchet.alarms.topic.topicArn)).toEqual({ Ref: expect.stringMatching(/^RatchetMonitoring/) });
  });

  it('keeps the outputs connect and redrive read under their plain keys, wherever it sits', () => {
    for (const key of [
      'ApiUrl',
      'WebhookUrl',
      'OpenAIWebhookUrl',
      'WebhookSigningSecretArn',
      'GeminiApiKeySecretArn',
      'TableName',
      'EffectsDeadLetterTable',
    ])
      template.hasOutput(key, {});
    // Azure's only where a resource is named.
    expect(Object.keys(template.toJSON().Outputs)).not.toContain('AzureOpenAIWebhookUrl');
  });

  it('brings one AWS Solutions finding into the app, the read grant’s wildcard, and none of its own', () => {
    const { app, stack, ratchet: r } = consumerApp();
    // The app's own functions and queue are its business (their findings are CDK defaults, acknowledged as an app would).
    const own = 'the app’s own resource, not Ratchet’s';
    const basicRole = 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]';
    for (const id of ['Submitter', 'Dashboard', 'OnBatchDone'])
      Validations.of(stack.node.findChild(id)).acknowledge({ id: basicRole, reason: own });
    for (const id of ['AwsSolutions-SQS3', 'AwsSolutions-SQS4'])
      Validations.of(stack.node.findChild('Audit')).acknowledge({ id, reason: own });
    // GET /operations/{name+}: names hold slashes, so a read grant ends in a wildcard. An app running cdk-nag says so once per grantee.
    const api = stack.getLogicalId(r.api.node.defaultChild as CfnElement);
    const readWildcard = `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:${REGION}:${ACCOUNT}:<${api}>/$default/GET/operations/*]`;
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow(/AwsSolutions-IAM5/);

    const again = consumerApp();
    for (const id of ['Submitter', 'Dashboard', 'OnBatchDone'])
      Validations.of(again.stack.node.findChild(id)).acknowledge({ id: basicRole, reason: own });
    for (const id of ['AwsSolutions-SQS3', 'AwsSolutions-SQS4'])
      Validations.of(again.stack.node.findChild('Audit')).acknowledge({ id, reason: own });
    for (const id of ['Submitter', 'Dashboard'])
      Validations.of(again.stack.node.findChild(id)).acknowledge({ id: readWildcard, reason: 'operation names hold slashes' });
    Validations.of(again.app).addPlugins(new AwsSolutionsChecks(again.app));
    expect(() => again.app.synth()).not.toThrow();
  });

  it('polls the Agent Platform when given a project and location: their variables and its credentials secret on the poll worker only', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'WithPlatform', { env: { account: ACCOUNT, region: REGION } });
    new Ratchet(stack, 'Ratchet', { agentPlatform: { project: 'my-project', location: 'us-central1' } });
    const platform = Template.fromStack(stack);
    const functions = Object.entries(platform.findResources('AWS::Lambda::Function'));
    const withProject = functions.filter(([, f]) => f.Properties.Environment?.Variables?.GOOGLE_CLOUD_PROJECT);
    expect(withProject.map(([, f]) => f.Properties.Description)).toEqual([
      'Reconcile poll worker: leases and polls the due jobs of the poll queue, through the same ingest',
    ]);
    expect(withProject[0]?.[1].Properties.Environment.Variables).toMatchObject({
      GOOGLE_CLOUD_PROJECT: 'my-project',
      GOOGLE_CLOUD_LOCATION: 'us-central1',
      AGENT_PLATFORM_CREDENTIALS_ARN: { Ref: expect.stringMatching(/AgentPlatformCredentials/) },
    });
    const readers = Object.values(platform.findResources('AWS::IAM::Policy')).filter((p) =>
      JSON.stringify(p.Properties.PolicyDocument).includes('AgentPlatformCredentials'),
    );
    expect(readers.map((p) => p.Properties.Roles[0].Ref)).toEqual([expect.stringMatching(/PollWorker/)]);
    platform.hasOutput('AgentPlatformCredentialsSecretArn', {});
    // Without it, no secret and no variable.
    expect(JSON.stringify(template.toJSON())).not.toContain('AgentPlatformCredentials');
  });

  it('polls OpenAI, Anthropic and Azure OpenAI and checks their webhooks with the secrets the app names, each readable only where it is used', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'WithProviders', { env: { account: ACCOUNT, region: REGION } });
    const own = (id: string) => new Secret(stack, id);
    new Ratchet(stack, 'Ratchet', {
      openai: { apiKeys: own('OpenAIKeys'), webhookSecret: own('OpenAIWebhook'), baseUrl: 'https://openai.example/v1' },
      anthropic: { apiKeys: Secret.fromSecretNameV2(stack, 'AnthropicKeys', 'team/anthropic') },
      azureOpenAI: { endpoint: 'https://my-resource.openai.azure.com', apiKey: own('AzureKey'), webhookSecret: own('AzureWebhook') },
    });
    const providers = Template.fromStack(stack);
    const fn = (description: RegExp) =>
      Object.values(providers.findResources('AWS::Lambda::Function')).find((f) => description.test(f.Properties.Description))?.Properties
        .Environment.Variables;
    const ref = (id: string) => ({ Ref: expect.stringMatching(new RegExp(`^${id}`)) });
    // The worker polls with them, the dispatcher lists each key's batches for discovery.
    for (const description of [/^Reconcile poll worker/, /^Reconcile dispatcher/])
      expect(fn(description)).toMatchObject({
        OPENAI_API_KEY_ARN: ref('OpenAIKeys'),
        OPENAI_BASE_URL: 'https://openai.example/v1',
        ANTHROPIC_API_KEY_ARN: expect.objectContaining({ 'Fn::Join': expect.anything() }),
        AZURE_OPENAI_ENDPOINT: 'https://my-resource.openai.azure.com',
        AZURE_OPENAI_API_KEY_ARN: ref('AzureKey'),
      });
    expect(fn(/webhooks and the operations API$/)).toMatchObject({
      OPENAI_WEBHOOK_SECRET_ARN: ref('OpenAIWebhook'),
      AZURE_OPENAI_ENDPOINT: 'https://my-resource.openai.azure.com',
      AZURE_OPENAI_WEBHOOK_SECRET_ARN: ref('AzureWebhook'),
    });
    // Each secret: GetSecretValue for the one function that uses it, and nothing else for anyone.
    const readersOf = (secret: string) =>
      Object.values(providers.findResources('AWS::IAM::Policy'))
        .filter((p) =>
          p.Properties.PolicyDocument.Statement.some((st: { Resource: unknown }) => JSON.stringify(st.Resource).includes(secret)),
        )
        .map((p) => [
          p.Properties.Roles[0].Ref.replace(/[0-9A-F]{8}$/, ''),
          p.Properties.PolicyDocument.Statement.filter((st: { Resource: unknown }) => JSON.stringify(st.Resource).includes(secret)).map(
            (st: { Action: unknown }) => st.Action,
          ),
        ]);
    providers.hasOutput('AzureOpenAIWebhookUrl', {});
    const pollers = [
      ['RatchetReconcileRole', ['secretsmanager:GetSecretValue']],
      ['RatchetPollWorkerRole', ['secretsmanager:GetSecretValue']],
    ];
    expect(readersOf('OpenAIKeys')).toEqual(pollers);
    expect(readersOf('secret:team/anthropic')).toEqual(pollers);
    expect(readersOf('AzureKey')).toEqual(pollers);
    expect(readersOf('OpenAIWebhook')).toEqual([['RatchetApiRole', ['secretsmanager:GetSecretValue']]]);
    expect(readersOf('AzureWebhook')).toEqual([['RatchetApiRole', ['secretsmanager:GetSecretValue']]]);
    // Without the props: none of their variables (the routes answer 503 not-configured, the providers are not polled).
    const variables = JSON.stringify(template.findResources('AWS::Lambda::Function'));
    for (const variable of ['OPENAI_', 'ANTHROPIC_', 'AZURE_OPENAI_']) expect(variables).not.toContain(variable);
  });

  it('lets the poll worker read Bedrock batch jobs of its own account and region only, and list none', async () => {
    const reconcile = (action: string, resource: string) => allowed('RatchetPollWorker', action, resource);
    const job = (region: string, account: string) => `arn:aws:bedrock:${region}:${account}:model-invocation-job/abc123`;
    expect(await reconcile('bedrock:GetModelInvocationJob', job(REGION, ACCOUNT))).toBe(true);
    expect(await reconcile('bedrock:GetModelInvocationJob', job('us-east-1', ACCOUNT))).toBe(false);
    expect(await reconcile('bedrock:GetModelInvocationJob', job(REGION, '210987654321'))).toBe(false);
    expect(await reconcile('bedrock:StopModelInvocationJob', job(REGION, ACCOUNT))).toBe(false);
    expect(await reconcile('bedrock:ListModelInvocationJobs', '*')).toBe(false);
    expect(await allowed('RatchetApi', 'bedrock:GetModelInvocationJob', job(REGION, ACCOUNT))).toBe(false);
    expect(await allowed('RatchetReconcile', 'bedrock:GetModelInvocationJob', job(REGION, ACCOUNT))).toBe(false);
  });

  it('the role a consumer grants may be any IGrantable, e.g. a role of its own', () => {
    const { stack, ratchet: r } = consumerApp();
    const role = new Role(stack, 'Worker', { assumedBy: new ServicePrincipal('ecs-tasks.amazonaws.com') });
    r.grantTrack(role);
    Template.fromStack(stack).hasResourceProperties('AWS::IAM::Policy', {
      Roles: [{ Ref: Match.stringLikeRegexp('^Worker') }],
      PolicyDocument: { Statement: [Match.objectLike({ Action: 'execute-api:Invoke' })] },
    });
  });
});
