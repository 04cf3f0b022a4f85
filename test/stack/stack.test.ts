/** Assertions on the synthesized template (bundling skipped; see bundle.test.ts for the real bundle). */
import { App, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { UNPROCESSABLE_REASONS } from '../../app/ports.ts';
import type { WebhookDecision } from '../../app/telemetry.ts';
import { HISTORY_FILTER } from '../../engines/dynamodb/tables.ts';
import { createMetrics, emfTelemetry } from '../../lambda/telemetry.ts';
import { RatchetStack } from '../../lib/ratchet-stack.ts';

let template: Template;

function synthStack(app: App) {
  return new RatchetStack(app, 'Ratchet', { env: { account: '123456789012', region: 'eu-west-1' } });
}

/** Active tracing: the one statement X-Ray needs, on `*` (it has no resource-level permissions). */
const XRAY = [['xray:PutTelemetryRecords', 'xray:PutTraceSegments'], '"*"'];
/** Reading one Bedrock batch inference job of the stack's own account and region (in whatever partition it is). */
const BEDROCK_READ = [
  ['bedrock:GetModelInvocationJob'],
  JSON.stringify({
    'Fn::Join': [
      '',
      ['arn:', { Ref: 'AWS::Partition' }, ':bedrock:', { Ref: 'AWS::Region' }, ':', { Ref: 'AWS::AccountId' }, ':model-invocation-job/*'],
    ],
  }),
];

/** Every IAM statement attached to the role whose logical id starts with `rolePrefix`: [actions, resource]. */
function permissionsOf(rolePrefix: string): Array<[string[], string]> {
  return Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((p) => p.Properties.Roles.some((r: { Ref: string }) => r.Ref.startsWith(rolePrefix)))
    .flatMap((p) => p.Properties.PolicyDocument.Statement)
    .map((st: { Action: string | string[]; Resource: unknown }) => [[st.Action].flat().sort(), JSON.stringify(st.Resource)]);
}

beforeAll(() => {
  template = Template.fromStack(synthStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } })));
});

describe('RatchetStack', () => {
  it('has the operations table keyed by name, with its stream as in the local runtime', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [{ AttributeName: 'name', KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
      StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
    template.hasResource('AWS::DynamoDB::Table', { DeletionPolicy: 'Retain' });
  });

  it('keeps the outbound webhook out of the template: a plain redeploy can neither drop nor reset it', () => {
    for (const fn of Object.values(template.findResources('AWS::Lambda::Function'))) {
      expect(fn.Properties.Environment.Variables.EFFECTS_WEBHOOK_URL).toBeUndefined();
    }
    template.hasOutput('EffectsWebhookUrlSecretArn', {});
    template.hasOutput('EffectsSigningSecretArn', {});
  });

  it('runs the API function on Node 24, arm64, with the table and the secret ARN in its environment', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: 10,
      Environment: {
        Variables: Match.objectLike({
          TABLE_NAME: { Ref: Match.stringLikeRegexp('^Operations') },
          WEBHOOK_SIGNING_SECRETS_ARN: { Ref: Match.stringLikeRegexp('^WebhookSigningSecrets') },
        }),
      },
      LoggingConfig: Match.objectLike({ LogFormat: 'JSON' }),
    });
    template.hasResourceProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
  });

  it('grants the API function its log group, GetItem/UpdateItem/BatchGetItem on the table, Query on the unprocessable list and on the history table and its list index, its secret and invoking reconcile, nothing else', () => {
    expect(permissionsOf('ApiRole')).toEqual([
      [['logs:CreateLogStream', 'logs:PutLogEvents'], expect.stringContaining('ApiLogs')],
      XRAY,
      // BatchGetItem: a page of GET /operations, its views read whole.
      [
        ['dynamodb:BatchGetItem', 'dynamodb:GetItem', 'dynamodb:UpdateItem'],
        expect.stringMatching(/^\{"Fn::GetAtt":\["Operations[0-9A-F]+","Arn"\]\}$/),
      ],
      // GET /decisions: the unprocessable deliveries' index only.
      [['dynamodb:Query'], expect.stringMatching(/index\/recent-by-recorded/)],
      [['secretsmanager:GetSecretValue'], expect.stringContaining('WebhookSigningSecrets')],
      [['dynamodb:Query'], expect.stringMatching(/^\{"Fn::GetAtt":\["History[0-9A-F]+","Arn"\]\}$/)],
      // GET /operations: the history table's list index.
      [['dynamodb:Query'], expect.stringMatching(/History[0-9A-F]+.*index\/recent-operations/)],
      // JWT-signed deliveries are verified by polling: the API wakes reconcile, that function only, no versions or aliases.
      [['lambda:InvokeFunction'], expect.stringMatching(/^\{"Fn::GetAtt":\["Reconcile[0-9A-F]+","Arn"\]\}$/)],
    ]);
    const api = Object.values(template.findResources('AWS::Lambda::Function')).find((fn) =>
      String(fn.Properties.Description).startsWith('Gemini and OpenAI webhooks'),
    );
    expect(Object.keys(api?.Properties.Environment.Variables)).toContain('RECONCILE_FUNCTION_NAME');
    expect(Object.keys(api?.Properties.Environment.Variables)).not.toContain('GEMINI_WEBHOOK_AUDIENCE');
  });

  it('grants the effects function the ledger, the dead letters, its secret and its queue, nothing else (the bus only with the EventBridge sink)', () => {
    expect(permissionsOf('EffectsRole')).toEqual([
      [['logs:CreateLogStream', 'logs:PutLogEvents'], expect.stringContaining('EffectsLogs')],
      [['dynamodb:GetItem', 'dynamodb:PutItem'], expect.stringContaining('EffectsLedger')],
      [['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:Query'], expect.stringContaining('EffectsDeadLetters')],
      [['secretsmanager:GetSecretValue'], expect.stringContaining('EffectsWebhookUrl')],
      [['secretsmanager:GetSecretValue'], expect.stringContaining('EffectsSigningSecret')],
      [
        ['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:ReceiveMessage'],
        expect.stringMatching(/"EffectsQueue[0-9A-F]+","Arn"/),
      ],
    ]);
    expect(permissionsOf('EffectsPipeRole')).toEqual([
      [
        ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'],
        expect.stringMatching(/Operations[0-9A-F]+","StreamArn"/),
      ],
      // No resource type: granted on the stream, it would allow nothing.
      [['dynamodb:ListStreams'], '"*"'],
      [['sqs:SendMessage'], expect.stringMatching(/EffectsQueue[0-9A-F]+.*EffectsPipeFailures/)],
    ]);
  });

  it('pipes the stream, filtered to state changes, late outcomes and overdue marks, into a FIFO queue per operation; the queue feeds the effects function', () => {
    template.hasResourceProperties('AWS::Pipes::Pipe', {
      Source: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Operations'), 'StreamArn'] },
      SourceParameters: {
        DynamoDBStreamParameters: Match.objectLike({ StartingPosition: 'TRIM_HORIZON', BatchSize: 10, MaximumRetryAttempts: 185 }),
        FilterCriteria: {
          Filters: [
            {
              Pattern: '{"eventName":["INSERT","MODIFY"],"dynamodb":{"NewImage":{"writeKind":{"S":["state-change","result","overdue"]}}}}',
            },
          ],
        },
      },
      Target: { 'Fn::GetAtt': [Match.stringLikeRegexp('^EffectsQueue'), 'Arn'] },
      TargetParameters: {
        SqsQueueParameters: { MessageGroupId: '$.dynamodb.NewImage.effectsGroup.S', MessageDeduplicationId: '$.eventID' },
      },
    });
    template.hasResourceProperties('AWS::SQS::Queue', {
      FifoQueue: true,
      ContentBasedDeduplication: false,
      MessageRetentionPeriod: 14 * 86400,
      VisibilityTimeout: 360,
      RedrivePolicy: {
        deadLetterTargetArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^EffectsDeadLetterQueue'), 'Arn'] },
        maxReceiveCount: 200,
      },
    });
    template.hasResourceProperties('AWS::SQS::Queue', { FifoQueue: true, MessageRetentionPeriod: 14 * 86400, SqsManagedSseEnabled: true });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^EffectsQueue'), 'Arn'] },
      BatchSize: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
    });
    // The effects queue's, the poll queue's, and the history writer's stream mapping.
    expect(Object.keys(template.findResources('AWS::Lambda::EventSourceMapping'))).toHaveLength(3);
    template.hasResourceProperties('AWS::Lambda::Function', {
      Environment: {
        Variables: Match.objectLike({
          EFFECTS_WEBHOOK_URL_ARN: { Ref: Match.stringLikeRegexp('^EffectsWebhookUrl') },
          EFFECTS_SIGNING_SECRET_ARN: { Ref: Match.stringLikeRegexp('^EffectsSigningSecret') },
          EFFECTS_LEDGER_TABLE: { Ref: Match.stringLikeRegexp('^EffectsLedger') },
          EFFECTS_DEAD_LETTER_TABLE: { Ref: Match.stringLikeRegexp('^EffectsDeadLetters') },
          EFFECTS_QUEUE_URL: { Ref: Match.stringLikeRegexp('^EffectsQueue') },
        }),
      },
    });
    template.hasResourceProperties('AWS::DynamoDB::Table', { TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true } });
    for (const output of ['EffectsQueueUrl', 'EffectsDeadLetterQueueUrl', 'EffectsDeadLetterTable', 'EffectsSigningSecretArn']) {
      template.hasOutput(output, {});
    }
  });

  it('indexes open operations sparsely (by next poll, projecting what the dispatcher groups by, and by age) and dispatches reconcile every minute with Query on those indexes', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      GlobalSecondaryIndexes: [
        {
          IndexName: 'open-by-due-v2',
          KeySchema: [
            { AttributeName: 'pollBucket', KeyType: 'HASH' },
            { AttributeName: 'nextPollAt', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: ['kind', 'credential'] },
        },
        {
          IndexName: 'open-by-age',
          KeySchema: [
            { AttributeName: 'ageBucket', KeyType: 'HASH' },
            { AttributeName: 'createdAt', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'KEYS_ONLY' },
        },
        {
          IndexName: 'recent-by-recorded',
          KeySchema: [
            { AttributeName: 'listPartition', KeyType: 'HASH' },
            { AttributeName: 'recordedAt', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'ALL' },
        },
      ],
    });
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Reconcile'), 'Arn'] } })],
    });
    // One run at a time, done before the next is due, never retried: two runs never poll the same operation.
    template.hasResourceProperties('AWS::Lambda::Function', {
      Timeout: 55,
      ReservedConcurrentExecutions: 1,
      Environment: {
        Variables: Match.objectLike({
          RECONCILE_INTERVAL_SECONDS: '60',
          GEMINI_API_KEY_ARN: { Ref: Match.stringLikeRegexp('^GeminiApiKey') },
          POLL_QUEUE_URL: { Ref: Match.stringLikeRegexp('^PollQueue') },
          // What ten workers poll in a minute at 100 ms a poll, 16 at a time each.
          POLL_QUEUE_ROOM: '96000',
        }),
      },
    });
    template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', {
      FunctionName: { Ref: Match.stringLikeRegexp('^Reconcile') },
      MaximumRetryAttempts: 0,
      MaximumEventAgeInSeconds: 60,
    });
    expect(permissionsOf('ReconcileRole')).toEqual([
      [['logs:CreateLogStream', 'logs:PutLogEvents'], expect.stringContaining('ReconcileLogs')],
      [['dynamodb:GetItem', 'dynamodb:UpdateItem'], expect.stringMatching(/^\{"Fn::GetAtt":\["Operations[0-9A-F]+","Arn"\]\}$/)],
      [['dynamodb:Query'], expect.stringMatching(/Operations[0-9A-F]+","Arn".*\/index\/open-by-due-v2"/)],
      [['dynamodb:Query'], expect.stringMatching(/Operations[0-9A-F]+","Arn".*\/index\/open-by-age"/)],
      [['secretsmanager:GetSecretValue'], expect.stringContaining('GeminiApiKey')],
      [['sqs:GetQueueAttributes', 'sqs:SendMessage'], expect.stringMatching(/^\{"Fn::GetAtt":\["PollQueue[0-9A-F]+","Arn"\]\}$/)],
    ]);
  });

  it('polls through a queue: workers at most maxConcurrency at once, each message retried then dead-lettered, the worker granted its lease and writes, its keys and the queue', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^PollQueue'), 'Arn'] },
      FunctionName: { Ref: Match.stringLikeRegexp('^PollWorker') },
      BatchSize: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: 10 },
    });
    // Six times the worker's timeout, as AWS advises for an SQS event source; five receives, then its dead-letter queue.
    template.hasResourceProperties('AWS::Lambda::Function', {
      Description: Match.stringLikeRegexp('^Reconcile poll worker'),
      Timeout: 120,
    });
    template.hasResourceProperties('AWS::SQS::Queue', {
      VisibilityTimeout: 720,
      MessageRetentionPeriod: 3600,
      RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^PollDeadLetterQueue'), 'Arn'] }, maxReceiveCount: 5 },
    });
    expect(permissionsOf('PollWorkerRole')).toEqual([
      [['logs:CreateLogStream', 'logs:PutLogEvents'], expect.stringContaining('PollWorkerLogs')],
      [['dynamodb:UpdateItem'], expect.stringMatching(/^\{"Fn::GetAtt":\["Operations[0-9A-F]+","Arn"\]\}$/)],
      [['secretsmanager:GetSecretValue'], expect.stringContaining('GeminiApiKey')],
      [['sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:ReceiveMessage'], expect.stringMatching(/PollQueue[0-9A-F]+","Arn"/)],
      BEDROCK_READ,
    ]);
  });

  it("polls Bedrock with the poll worker's own role: one job of this account and region at a time, never a listing", () => {
    const statements = permissionsOf('PollWorkerRole').filter(([actions]) => actions.some((action) => action.startsWith('bedrock:')));
    expect(statements).toEqual([BEDROCK_READ]);
    // No other function may touch Bedrock.
    for (const role of ['ApiRole', 'EffectsRole', 'HistoryWriterRole', 'BedrockEventsRole', 'ReconcileRole'])
      expect(
        permissionsOf(role)
          .flatMap(([actions]) => actions)
          .filter((action) => action.startsWith('bedrock:')),
      ).toEqual([]);
  });

  it("takes Bedrock's batch job state changes from the default bus to a function that may only write the operations table", () => {
    const rules = Object.entries(template.findResources('AWS::Events::Rule')).filter(
      ([, rule]) => rule.Properties.EventPattern?.source?.[0] === 'aws.bedrock',
    );
    expect(rules).toHaveLength(1);
    const [ruleId, rule] = rules[0] as [string, { Properties: Record<string, unknown> }];
    // The default bus: no EventBusName.
    expect(rule.Properties.EventBusName).toBeUndefined();
    expect(rule.Properties.EventPattern).toEqual({ source: ['aws.bedrock'], 'detail-type': ['Batch Inference Job State Change'] });
    expect(rule.Properties.Targets).toEqual([
      expect.objectContaining({ Arn: { 'Fn::GetAtt': [expect.stringMatching(/^BedrockEvents[0-9A-F]+$/), 'Arn'] } }),
    ]);
    template.hasResourceProperties('AWS::Lambda::Permission', {
      FunctionName: { 'Fn::GetAtt': [Match.stringLikeRegexp('^BedrockEvents'), 'Arn'] },
      Principal: 'events.amazonaws.com',
      SourceArn: { 'Fn::GetAtt': [ruleId, 'Arn'] },
    });
    expect(permissionsOf('BedrockEventsRole')).toEqual([
      [['logs:CreateLogStream', 'logs:PutLogEvents'], expect.stringContaining('BedrockEventsLogs')],
      [['dynamodb:UpdateItem'], expect.stringMatching(/^\{"Fn::GetAtt":\["Operations[0-9A-F]+","Arn"\]\}$/)],
    ]);
    const fn = Object.entries(template.findResources('AWS::Lambda::Function')).find(([id]) => id.startsWith('BedrockEvents'))?.[1];
    expect(Object.keys(fn?.Properties.Environment.Variables).sort()).toEqual(['POWERTOOLS_SERVICE_NAME', 'TABLE_NAME']);
  });

  it('routes the webhook without authorizer (signature-checked) and the operations routes through IAM', () => {
    const routes = template.findResources('AWS::ApiGatewayV2::Route');
    const byKey = Object.fromEntries(Object.values(routes).map((r) => [r.Properties.RouteKey, r.Properties.AuthorizationType]));
    expect(byKey).toEqual({
      'POST /webhooks/gemini': 'NONE',
      'POST /webhooks/openai': 'NONE',
      'POST /webhooks/azure-openai': 'NONE',
      'GET /healthz': 'NONE',
      'POST /operations': 'AWS_IAM',
      'GET /operations': 'AWS_IAM',
      'GET /operations/{name+}': 'AWS_IAM',
      'GET /decisions': 'AWS_IAM',
    });
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      StageName: '$default',
      AutoDeploy: true,
      DefaultRouteSettings: { ThrottlingRateLimit: 200, ThrottlingBurstLimit: 400 },
      AccessLogSettings: Match.objectLike({ DestinationArn: Match.anyValue() }),
    });
  });

  it('serves no route that is neither IAM-authorized nor signature-verified (healthz, which reveals nothing, aside), each with its own throttle', () => {
    const routes = Object.values(template.findResources('AWS::ApiGatewayV2::Route')).map((r) => r.Properties);
    // No catch-all: API Gateway forwards only these keys, so no other path of the app is reachable.
    expect(routes.map((r) => r.RouteKey)).not.toContain('$default');
    expect(routes.every((r) => /^(GET|POST) \//.test(r.RouteKey))).toBe(true);
    const open = routes.filter((r) => r.AuthorizationType !== 'AWS_IAM').map((r) => r.RouteKey);
    expect(open.sort()).toEqual(['GET /healthz', 'POST /webhooks/azure-openai', 'POST /webhooks/gemini', 'POST /webhooks/openai']);
    // Each open webhook route reaches the API function, whose app verifies every delivery's signature.
    const integrations = template.findResources('AWS::ApiGatewayV2::Integration');
    for (const key of ['POST /webhooks/gemini', 'POST /webhooks/openai', 'POST /webhooks/azure-openai']) {
      const webhook = routes.find((r) => r.RouteKey === key);
      const target = (webhook.Target['Fn::Join'][1] as unknown[])[1] as { Ref: string };
      const functionId = integrations[target.Ref]?.Properties.IntegrationUri['Fn::GetAtt'][0] as string;
      expect(template.findResources('AWS::Lambda::Function')[functionId]?.Properties.Description).toBe(
        'Gemini and OpenAI webhooks and the operations API',
      );
    }
    const stage = Object.values(template.findResources('AWS::ApiGatewayV2::Stage'))[0];
    const settings = stage?.Properties.RouteSettings as Record<string, { ThrottlingRateLimit: number; ThrottlingBurstLimit: number }>;
    expect(Object.keys(settings).sort()).toEqual(routes.map((r) => r.RouteKey).sort());
    for (const key of ['POST /webhooks/gemini', 'POST /webhooks/openai', 'POST /webhooks/azure-openai'])
      expect(settings[key]).toEqual({ ThrottlingRateLimit: 150, ThrottlingBurstLimit: 300 });
    for (const key of ['POST /operations', 'GET /operations', 'GET /operations/{name+}', 'GET /decisions'])
      expect(settings[key]).toEqual({ ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 });
    // Route settings name routes: the stage is deployed after them.
    const routeIds = Object.keys(template.findResources('AWS::ApiGatewayV2::Route'));
    const dependsOn = Object.values(template.findResources('AWS::ApiGatewayV2::Stage'))[0]?.DependsOn as string[];
    for (const id of routeIds) expect(dependsOn).toContain(id);
  });

  it('takes the webhook schemes and the per-route throttles as props', () => {
    const stack = new RatchetStack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Tuned', {
      env: { account: '123456789012', region: 'eu-west-1' },
      geminiWebhookSchemes: ['hmac'],
      throttling: { webhook: { rateLimit: 40, burstLimit: 80 } },
    });
    const tuned = Template.fromStack(stack);
    tuned.hasResourceProperties('AWS::Lambda::Function', {
      Description: 'Gemini and OpenAI webhooks and the operations API',
      Environment: { Variables: Match.objectLike({ GEMINI_WEBHOOK_SCHEMES: 'hmac' }) },
    });
    const settings = Object.values(tuned.findResources('AWS::ApiGatewayV2::Stage'))[0]?.Properties.RouteSettings;
    expect(settings['POST /webhooks/gemini']).toEqual({ ThrottlingRateLimit: 40, ThrottlingBurstLimit: 80 });
    expect(settings['POST /webhooks/openai']).toEqual({ ThrottlingRateLimit: 40, ThrottlingBurstLimit: 80 });
    expect(settings['GET /operations']).toEqual({ ThrottlingRateLimit: 50, ThrottlingBurstLimit: 100 });
    // Left out, the API function carries no scheme setting: all three are accepted.
    expect(JSON.stringify(template.findResources('AWS::Lambda::Function'))).not.toContain('GEMINI_WEBHOOK_SCHEMES');
  });

  it('creates every secret as "not configured" (never a generated value) and keeps it when the stack goes', () => {
    const secrets = template.findResources('AWS::SecretsManager::Secret');
    expect(
      Object.keys(secrets)
        .map((id) => id.replace(/[0-9A-F]{8}$/, ''))
        .sort(),
    ).toEqual(['EffectsSigningSecret', 'EffectsWebhookUrl', 'GeminiApiKey', 'WebhookSigningSecrets']);
    for (const secret of Object.values(secrets)) {
      expect(secret.Properties).toMatchObject({ SecretString: 'not-configured' });
      expect(secret.Properties.GenerateSecretString).toBeUndefined();
      expect(secret).toMatchObject({ DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain' });
    }
  });

  it('writes history from the stream: every applied write, filtered, bisected, bounded, failures kept; the writer may only PutItem and UpdateItem', () => {
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      // The list of operations: 32 shards of latest items, only what the list's filters read projected.
      GlobalSecondaryIndexes: [
        {
          IndexName: 'recent-operations',
          KeySchema: [
            { AttributeName: 'listShard', KeyType: 'HASH' },
            { AttributeName: 'listSort', KeyType: 'RANGE' },
          ],
          Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: ['state', 'kind', 'openOverdue'] },
        },
      ],
      KeySchema: [
        { AttributeName: 'name', KeyType: 'HASH' },
        { AttributeName: 'version', KeyType: 'RANGE' },
      ],
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
    });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Operations'), 'StreamArn'] },
      StartingPosition: 'TRIM_HORIZON',
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 10,
      MaximumRecordAgeInSeconds: 86_400,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      DestinationConfig: { OnFailure: { Destination: { 'Fn::GetAtt': [Match.stringLikeRegexp('^HistoryFailures'), 'Arn'] } } },
      FilterCriteria: { Filters: [{ Pattern: JSON.stringify(HISTORY_FILTER) }] },
    });
    const writes = permissionsOf('HistoryWriterRole').filter(([actions]) =>
      actions.some((a) => a.startsWith('dynamodb:') && !/Stream|Shard|GetRecords/.test(a)),
    );
    // PutItem: an entry; UpdateItem: the operation's latest item (the list's read model).
    expect(writes).toEqual([[['dynamodb:PutItem', 'dynamodb:UpdateItem'], expect.stringMatching(/History[0-9A-F]+/)]]);
    // The on-failure destination: SendMessage only (CDK's SqsDlq would add GetQueueAttributes and GetQueueUrl).
    expect(permissionsOf('HistoryWriterRole').filter(([actions]) => actions.some((a) => a.startsWith('sqs:')))).toEqual([
      [['sqs:SendMessage'], expect.stringMatching(/HistoryFailures[0-9A-F]+/)],
    ]);
  });

  it('protects what holds data: tables with deletion protection, queues and log groups retained', () => {
    const tables = template.findResources('AWS::DynamoDB::Table');
    expect(Object.keys(tables)).toHaveLength(4);
    for (const table of Object.values(tables)) {
      expect(table).toMatchObject({ DeletionPolicy: 'Retain', Properties: { DeletionProtectionEnabled: true } });
    }
    for (const type of ['AWS::SQS::Queue', 'AWS::Logs::LogGroup']) {
      for (const resource of Object.values(template.findResources(type))) expect(resource).toMatchObject({ DeletionPolicy: 'Retain' });
    }
  });

  it('reserves concurrency for the open webhook route, and writes JSON access logs with latencies and integration errors', () => {
    template.hasResourceProperties('AWS::Lambda::Function', {
      Description: 'Gemini and OpenAI webhooks and the operations API',
      ReservedConcurrentExecutions: 20,
    });
    const [stage] = Object.values(template.findResources('AWS::ApiGatewayV2::Stage'));
    const format = JSON.parse(stage?.Properties.AccessLogSettings.Format);
    expect(format).toMatchObject({
      status: '$context.status',
      latencyMs: '$context.responseLatency',
      integrationLatencyMs: '$context.integrationLatency',
      integrationError: '$context.integrationErrorMessage',
    });
  });

  it('alarms on every way it can go wrong, to one topic, with a dashboard', () => {
    const alarms = template.findResources('AWS::CloudWatch::Alarm');
    const byName: Record<string, { AlarmActions: unknown; TreatMissingData: string }> = Object.fromEntries(
      Object.values(alarms).map((a) => [a.Properties.AlarmName, a.Properties]),
    );
    expect(Object.keys(byName).sort()).toEqual(
      [
        'Api5xx',
        'ApiLatency',
        ...['Api', 'Effects', 'Reconcile', 'PollWorker', 'History', 'BedrockEvents'].flatMap((fn) => [
          `${fn}Errors`,
          `${fn}Throttles`,
          `${fn}Duration`,
        ]),
        'EffectsBacklogAge',
        'EffectsBacklogDepth',
        'EffectsQueueDeadLetters',
        'EffectsPipeFailures',
        'PollQueueDeadLetters',
        'HistoryFailures',
        'EffectsDeadLettered',
        'EffectsUndecodable',
        'WebhookNotRecorded',
        'WebhookNotConfigured',
        'WebhookUnprocessable',
        'JobsNotFound',
        'WebhookKeysUnavailable',
        'GeminiWebhookDisabled',
        'GeminiKeyRefused',
        'ProviderKeyRefused',
        'TerminalConflicts',
        'ReconcileFailures',
        'StuckOperations',
      ]
        .map((name) => `Ratchet-${name}`)
        .sort(),
    );
    for (const alarm of Object.values(byName)) {
      expect(alarm.AlarmActions).toEqual([{ Ref: expect.stringMatching(/^MonitoringTopic/) }]);
      expect(alarm.TreatMissingData).toBe('notBreaching');
    }
    expect(byName['Ratchet-GeminiWebhookDisabled']).toMatchObject({ MetricName: 'ReconcileWebhooksDisabled', Threshold: 1 });
    expect(byName['Ratchet-GeminiKeyRefused']).toMatchObject({ MetricName: 'RefusedGeminiKeys', Threshold: 1 });
    expect(byName['Ratchet-ProviderKeyRefused']).toMatchObject({ MetricName: 'RefusedProviderKeys', Threshold: 1 });
    expect(byName['Ratchet-JobsNotFound']).toMatchObject({ MetricName: 'ReconcileNotFoundStopped', Threshold: 1 });
    expect(byName['Ratchet-StuckOperations']).toMatchObject({ MetricName: 'ReconcileOldestOpenAgeSeconds', Threshold: 48 * 3600 });
    expect(byName['Ratchet-EffectsBacklogAge']).toMatchObject({ MetricName: 'ApproximateAgeOfOldestMessage', Threshold: 3600 });
    expect(byName['Ratchet-EffectsQueueDeadLetters']).toMatchObject({ MetricName: 'ApproximateNumberOfMessagesVisible', Threshold: 1 });
    template.resourceCountIs('AWS::SNS::Topic', 1);
    // A topic policy replaces SNS's default one: this account's alarms are let in by name (test/integration/aws-iam.test.ts simulates it).
    template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Allow', Principal: { Service: 'cloudwatch.amazonaws.com' }, Action: 'sns:Publish' }),
        ]),
      },
    });
    template.resourceCountIs('AWS::CloudWatch::Dashboard', 1);
    template.hasOutput('AlarmTopicArn', {});
  });

  it('alarms on webhook decisions by the one metric and dimension set the API function writes (EMF), so CloudWatch matches them', () => {
    type Dimension = { Name: string; Value: string };
    type Stat = { Namespace: string; MetricName: string; Dimensions: Dimension[] };
    const sorted = (stat: Stat) => ({ ...stat, Dimensions: [...stat.Dimensions].sort((a, b) => a.Name.localeCompare(b.Name)) });
    /** The metrics an alarm reads: its own, or each one its math expression uses. */
    const statsOf = (name: string): Stat[] => {
      const [alarm] = Object.values(template.findResources('AWS::CloudWatch::Alarm', { Properties: { AlarmName: `Ratchet-${name}` } }));
      const properties = alarm?.Properties;
      if (properties?.MetricName) {
        const { Namespace, MetricName, Dimensions } = properties;
        return [sorted({ Namespace, MetricName, Dimensions })];
      }
      return (properties?.Metrics ?? []).flatMap((m: { MetricStat?: { Metric: Stat } }) =>
        m.MetricStat ? [sorted(m.MetricStat.Metric)] : [],
      );
    };
    /** What lambda/telemetry.ts writes for a delivery of this decision and reason: the EMF line, read as CloudWatch reads it. */
    const emitted = (decision: WebhookDecision, reason: string): Stat => {
      vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
      const lines: string[] = [];
      const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => lines.push(String(chunk)) > 0);
      try {
        emfTelemetry(createMetrics()).webhook({ decision, reason }, 0.01);
      } finally {
        write.mockRestore();
        vi.unstubAllEnvs();
      }
      const line = lines.map((one) => JSON.parse(one)).find((one) => 'ratchet_webhook_deliveries_total' in one);
      const [directive] = line._aws.CloudWatchMetrics;
      expect(directive.Dimensions).toHaveLength(1);
      return sorted({
        Namespace: directive.Namespace,
        MetricName: directive.Metrics[0].Name,
        Dimensions: directive.Dimensions[0].map((name: string) => ({ Name: name, Value: line[name] })),
      });
    };
    expect(statsOf('WebhookNotRecorded')).toEqual([emitted('not-recorded', 'not-recorded')]);
    expect(statsOf('WebhookNotConfigured')).toEqual([emitted('not-configured', 'not-configured')]);
    expect(statsOf('WebhookKeysUnavailable')).toEqual([emitted('not-configured', 'keys-unavailable')]);
    expect(statsOf('TerminalConflicts')).toEqual([emitted('discarded', 'terminal-conflict')]);
    expect(statsOf('WebhookUnprocessable')).toEqual(UNPROCESSABLE_REASONS.map((reason) => emitted('unprocessable', reason)));
    // Counted once: no alarm reads a per-decision metric of its own any more.
    const names = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map((a) => a.Properties.MetricName);
    expect(names.filter((name) => /^Webhook/.test(name ?? ''))).toEqual([]);
  });

  it('subscribes an e-mail address to the alarms when one is given', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new RatchetStack(app, 'WithEmail', { alarmEmail: 'ops@example.com', apiReservedConcurrency: 0 });
    const withEmail = Template.fromStack(stack);
    withEmail.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    const api = Object.values(withEmail.findResources('AWS::Lambda::Function')).find(
      (f) => f.Properties.Description === 'Gemini and OpenAI webhooks and the operations API',
    );
    expect(api?.Properties.ReservedConcurrentExecutions).toBeUndefined();
  });

  it('passes the AWS Solutions checks (cdk-nag), with every exception explained', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    synthStack(app);
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).not.toThrow();
  });
});
