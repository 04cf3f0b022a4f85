/**
 * Ratchet as a construct any CDK app adds (`new Ratchet(this, 'Ratchet')`):
 * the operations table (stream on); the HTTP API whose Lambda verifies
 * Gemini's and OpenAI's (and Azure OpenAI's) webhooks and ingests them through
 * the reducer; a rule taking Bedrock's batch job events from the default bus
 * into the same ingest; the effects Lambda fed, per operation in order, by a
 * FIFO queue that an EventBridge Pipe fills from the table's stream; the
 * scheduled reconcile Lambda, polling every provider it has a credential for.
 * An app reacts to changes with `onStateChange` (a rule on Ratchet's bus) and
 * lets its own code track and read jobs with `grantTrack` / `grantRead`.
 *
 * Lean by default: each function sized by measurement, JSON logs at INFO
 * without the platform's per-invocation lines, X-Ray on the webhook's
 * function only at Lambda's own sampling, and the EventBridge sink on only
 * when the app asks for Ratchet's events (docs/operations.md, "What it costs
 * in AWS", says what each setting costs).
 */
import { Aws, CfnOutput, Duration, RemovalPolicy, SecretValue, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import { type CfnStage, HttpApi, HttpMethod, HttpNoneAuthorizer, HttpStage, LogGroupLogDestination } from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import { AttributeType, BillingMode, ProjectionType, StreamViewType, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { EventBus, type IRuleTarget, Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { Grant, type IGrantable, PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import {
  ApplicationLogLevel,
  FilterCriteria,
  type IEventSourceDlq,
  StartingPosition,
  SystemLogLevel,
  Tracing,
} from 'aws-cdk-lib/aws-lambda';
import { DynamoEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { CfnPipe } from 'aws-cdk-lib/aws-pipes';
import { type ISecret, Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { type IQueue, Queue, QueueEncryption } from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { DEFAULT_HISTORY_RETENTION_DAYS } from '../app/history.ts';
import { NOT_CONFIGURED } from '../app/not-configured.ts';
import type { OperationKind, OperationState } from '../core/lifecycle.ts';
import {
  AGE_INDEX,
  AGE_INDEX_PARTITION,
  AGE_INDEX_SORT,
  DEAD_LETTER_KEYS,
  DEAD_LETTER_TTL_ATTRIBUTE,
  EFFECTS_GROUP_ATTRIBUTE,
  HISTORY_FILTER,
  HISTORY_MAPPING,
  HISTORY_PARTITION_KEY,
  HISTORY_SORT_KEY,
  HISTORY_TTL_ATTRIBUTE,
  LEDGER_PARTITION_KEY,
  LEDGER_TTL_ATTRIBUTE,
  LIST_INDEX,
  LIST_INDEX_PARTITION,
  LIST_INDEX_SORT,
  OPEN_INDEX,
  OPEN_INDEX_PARTITION,
  OPEN_INDEX_PROJECTED,
  OPEN_INDEX_SORT,
  PARTITION_KEY,
  PREVIOUS_OPEN_INDEX,
  RECENT_INDEX,
  RECENT_INDEX_PARTITION,
  RECENT_INDEX_PROJECTION,
  RECENT_INDEX_SORT,
  TTL_ATTRIBUTE,
} from '../engines/dynamodb/tables.ts';
import { BEDROCK_EVENT_DETAIL_TYPE, BEDROCK_EVENT_SOURCE } from '../lambda/bedrock-settings.ts';
import { STATE_CHANGE_FILTER } from '../lambda/effects/filter.ts';
import {
  EFFECTS_PIPE,
  EFFECTS_QUEUE,
  EVENTBRIDGE_DETAIL_TYPE,
  EVENTBRIDGE_OVERDUE_DETAIL_TYPE,
  EVENTBRIDGE_SOURCE,
} from '../lambda/effects/settings.ts';
import { POLLS_AT_ONCE } from '../lambda/reconcile/fanout-settings.ts';
import { RatchetAlarms } from './ratchet-alarms.ts';
import { RatchetFunction } from './ratchet-function.ts';

/**
 * Every secret starts as "not configured" (never a generated value that would
 * reach a verifier or Gemini as if it were real) and outlives the stack.
 */
const notConfiguredYet = { secretStringValue: SecretValue.unsafePlainText(NOT_CONFIGURED), removalPolicy: RemovalPolicy.RETAIN };

/** Every table: on demand, encrypted, point-in-time recovery, and kept (deletion protection, retained with the stack). */
const durableTable = {
  billingMode: BillingMode.PAY_PER_REQUEST,
  encryption: TableEncryption.AWS_MANAGED,
  pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
  deletionProtection: true,
  removalPolicy: RemovalPolicy.RETAIN,
};

/** Every queue: TLS only, encrypted, retained with the stack. */
const durableQueue = { enforceSSL: true, encryption: QueueEncryption.SQS_MANAGED, removalPolicy: RemovalPolicy.RETAIN };

/** JSON access logs with the latencies and the integration's error, one line per request. */
const ACCESS_LOG_FORMAT = AccessLogFormat.custom(
  JSON.stringify({
    requestId: '$context.requestId',
    time: '$context.requestTime',
    ip: '$context.identity.sourceIp',
    route: '$context.routeKey',
    status: '$context.status',
    responseLength: '$context.responseLength',
    latencyMs: '$context.responseLatency',
    integrationLatencyMs: '$context.integrationLatency',
    integrationStatus: '$context.integration.status',
    integrationError: '$context.integrationErrorMessage',
    error: '$context.error.message',
  }),
);

const DEFAULT_THROTTLING = {
  webhook: { rateLimit: 150, burstLimit: 300 },
  operations: { rateLimit: 50, burstLimit: 100 },
  healthz: { rateLimit: 5, burstLimit: 10 },
};

/** The open routes deliveries come to, each verified by its signature in the API function. */
const WEBHOOK_PATHS = ['/webhooks/gemini', '/webhooks/openai', '/webhooks/azure-openai'];

/**
 * Reconcile's defaults. Ten workers at once, each polling POLLS_AT_ONCE at a time, sweep a million open jobs in
 * about 13 minutes against a provider answering in 100 ms (docs/benchmarks.md: at most 30 asked).
 */
const DEFAULT_RECONCILE = { maxConcurrency: 10, batchSize: 10, intervalMinutes: 1 };
/** One poll worker invocation's limit: a batch of 10 messages (500 jobs) takes about 4 s at 100 ms a poll. */
const POLL_WORKER_TIMEOUT = Duration.minutes(2);

/** The functions, by the name the memory setting uses. */
export type RatchetFunctionName = 'api' | 'effects' | 'history' | 'reconcile' | 'pollWorker' | 'bedrockEvents';

/**
 * Memory per function in MB. Each bundle's peak RSS under load on moto
 * (bench/aws-cost.ts) is 77 to 110 MB: 256 MB leaves more than twice that.
 * The functions mostly wait (DynamoDB, the receiver), which Lambda bills in
 * proportion to memory, while CPU time costs the same below one vCPU.
 * Reconcile's dispatcher and its poll worker keep 512 MB: they load the
 * providers' SDKs (discovery lists batches; the worker polls).
 */
export const DEFAULT_MEMORY_MB: Record<RatchetFunctionName, number> = {
  api: 256,
  effects: 256,
  history: 256,
  reconcile: 512,
  pollWorker: 512,
  bedrockEvents: 256,
};

export interface RatchetProps {
  /** Subscribes this address to the alarm topic. */
  alarmEmail?: string;
  /**
   * X-Ray. Lambda itself decides which invocations it traces when its caller
   * sent no sampling decision, and none of Ratchet's callers sends one (an
   * HTTP API, the SQS and stream event sources, the schedule): the first
   * invocation each second and 5 % of the others, per function. X-Ray's
   * sampling rules (AWS::XRay::SamplingRule) do not change that: they are
   * read by the X-Ray SDK and ADOT, API Gateway REST APIs, AppSync and Step
   * Functions (https://docs.aws.amazon.com/xray/latest/devguide/xray-console-sampling.html,
   * https://docs.aws.amazon.com/lambda/latest/dg/services-xray.html), so none is built.
   * - `'webhook'` (default): active tracing on the API function only (each
   *   webhook's verify and write), about 6 % of invocations at 100 a second;
   *   the others none, and no X-Ray grant;
   * - `'all'`: on every function ($5 per million traces recorded, each
   *   function's invocations its own traces);
   * - `'off'`: none (Lambda's PassThrough: nothing recorded, no X-Ray grant).
   */
  tracing?: 'webhook' | 'all' | 'off';
  /** Memory per function in MB (default DEFAULT_MEMORY_MB). */
  memoryMb?: Partial<Record<RatchetFunctionName, number>>;
  /** The lowest level of the functions' own log lines CloudWatch receives (default INFO: every decision, no debug). */
  logLevel?: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /**
   * The lowest level of the Lambda platform's lines (default WARN: its
   * START, END and REPORT lines, three an invocation, are left out; Lambda's
   * metrics carry their durations). INFO keeps them (REPORT's peak memory).
   */
  platformLogLevel?: 'DEBUG' | 'INFO' | 'WARN';
  /**
   * For one deploy of a stack deployed before `open-by-due-v2` (the due-job
   * schedule with only `kind` and `credential` projected): keeps its
   * `open-by-due` index as it was, and reconcile reading it, while the new
   * index is built beside it (DynamoDB adds or deletes one index a table
   * update). Deploy again without it once `open-by-due-v2` is ACTIVE: that
   * deletes the old one. A new stack leaves it unset. docs/operations.md,
   * "Upgrading".
   */
  keepPreviousOpenIndex?: boolean;
  /**
   * The EventBridge sink: each effect also put on Ratchet's bus ($1.00 per
   * million events). Default: on exactly when the app adds a rule with
   * `onStateChange` or `onOverdue`; `true` for rules of the app's own on the
   * bus (`bus`); `false` refuses `onStateChange`/`onOverdue`.
   */
  eventBridgeSink?: boolean;
  /** Reserved concurrency of the API function (default 20; 0: none reserved, e.g. in an account limited to 10). */
  apiReservedConcurrency?: number;
  /**
   * The `aud` dynamic-webhook JWTs must carry (GEMINI_WEBHOOK_AUDIENCE); unset,
   * JWT-signed deliveries are refused. `v1a` (Ed25519) deliveries need no setting.
   */
  geminiWebhookAudience?: string;
  /**
   * The webhook signature schemes accepted (GEMINI_WEBHOOK_SCHEMES; default
   * all three). Leaving out the ones Gemini does not use for you (e.g.
   * `['hmac']` for static webhooks only) means junk `v1a` or JWT signatures
   * never make the API fetch Google's keys.
   */
  geminiWebhookSchemes?: Array<'hmac' | 'v1a' | 'jwt'>;
  /**
   * Throttling per route, so a flood on one cannot 429 the others (API
   * Gateway's route settings; default: each webhook route 150/s with bursts of 300,
   * the IAM routes together 50/s and 100, /healthz 5/s and 10).
   */
  throttling?: { webhook?: RouteThrottle; operations?: RouteThrottle; healthz?: RouteThrottle };
  /** How long history entries are kept (default 90 days). */
  historyRetentionDays?: number;
  /**
   * The Gemini Enterprise Agent Platform (formerly Vertex AI) project and
   * location whose jobs reconcile polls (batch prediction jobs, Veo
   * operations, interactions named `projects/{project}/locations/{location}/…`).
   * Its credentials go in the `AgentPlatformCredentials` secret (a service
   * account key or a workload identity federation configuration, as JSON).
   * Unset: only the Gemini API is polled.
   */
  agentPlatform?: { project: string; location: string };
  /**
   * OpenAI (`openai/…` jobs): the secrets, of your own, that hold what
   * reconcile polls with (`apiKeys`: one key, or label=key pairs as
   * OPENAI_API_KEYS) and what `POST /webhooks/openai` checks deliveries
   * against (`webhookSecret`: the endpoint's `whsec_…`, space-separated while
   * rotating). Each function may read only the secret it uses. Without
   * `apiKeys` OpenAI's jobs are not polled; without `webhookSecret` the route
   * answers 503 `not-configured` (OpenAI retries for 72 hours).
   */
  openai?: { apiKeys?: ISecret; webhookSecret?: ISecret; baseUrl?: string };
  /** Anthropic (`anthropic/…` batches, which send no webhooks): the secret of the key(s) reconcile polls with. */
  anthropic?: { apiKeys?: ISecret; baseUrl?: string };
  /**
   * Azure OpenAI batches (`azure-openai/{resource}/batches/…`): the resource's
   * endpoint (`https://{resource}.openai.azure.com`), the secret of its key
   * (reconcile) and of its webhook's signing secret (`POST /webhooks/azure-openai`).
   */
  azureOpenAI?: { endpoint: string; apiKey?: ISecret; webhookSecret?: ISecret };
  /**
   * Reconcile on AWS: a dispatcher every `intervalMinutes` (default 1; also each job's base poll interval) hands
   * the due jobs, grouped by provider and key, to the poll queue; poll workers take `batchSize` messages (default
   * 10, of up to 50 jobs each) per invocation, at most `maxConcurrency` at once (the event source's
   * MaximumConcurrency, 2 to 1000; default 10: a million open jobs swept in about 13 minutes at 100 ms a poll).
   * Each worker paces each key on its own: `maxConcurrency` bounds how many ask one key at once.
   */
  reconcile?: { maxConcurrency?: number; batchSize?: number; intervalMinutes?: number };
}

/** Requests per second (steady) and burst of one route. */
export interface RouteThrottle {
  rateLimit: number;
  burstLimit: number;
}

/** Which state changes an `onStateChange` rule matches; each list left out matches anything. */
export interface StateChangeFilter {
  kinds?: OperationKind[];
  /** The state the operation moved to. */
  states?: OperationState[];
  /** Operation names, e.g. `batches/123`. */
  names?: string[];
}

export class Ratchet extends Construct {
  /** The operations table (one item per operation). */
  readonly table: Table;
  /** History of every applied write, per operation. */
  readonly historyTable: Table;
  readonly api: HttpApi;
  readonly apiFunction: RatchetFunction;
  readonly effectsFunction: RatchetFunction;
  readonly effectsQueue: Queue;
  /** Reconcile's dispatcher (scheduled; the API wakes it): hands the due jobs to `pollQueue`. */
  readonly reconcileFunction: RatchetFunction;
  /** Reconcile's poll workers: fed by `pollQueue`, at most `reconcile.maxConcurrency` at once. */
  readonly pollWorkerFunction: RatchetFunction;
  /** The due jobs on their way from the dispatcher to the poll workers. */
  readonly pollQueue: Queue;
  readonly historyFunction: RatchetFunction;
  /** Takes Bedrock's batch job events from the default bus into the ingest. */
  readonly bedrockEventsFunction: RatchetFunction;
  readonly bus: EventBus;
  readonly alarms: RatchetAlarms;
  private readonly eventBridgeSink: boolean | undefined;
  private eventBridgeSinkOn = false;

  /** The API's base URL (`https://….execute-api.….amazonaws.com`): what the client is pointed at. */
  get apiUrl(): string {
    return this.api.apiEndpoint;
  }

  /** Where Gemini's webhooks go (`npm run connect` registers it). */
  get webhookUrl(): string {
    return `${this.api.apiEndpoint}/webhooks/gemini`;
  }

  /** The endpoint to add in OpenAI's webhook settings (its `whsec_` secret goes in the `openai.webhookSecret` secret). */
  get openaiWebhookUrl(): string {
    return `${this.api.apiEndpoint}/webhooks/openai`;
  }

  /** The endpoint for the Azure OpenAI resource's webhook. */
  get azureOpenAIWebhookUrl(): string {
    return `${this.api.apiEndpoint}/webhooks/azure-openai`;
  }

  constructor(scope: Construct, id: string, props: RatchetProps = {}) {
    super(scope, id);

    this.table = new Table(this, 'Operations', {
      partitionKey: { name: PARTITION_KEY, type: AttributeType.STRING },
      stream: StreamViewType.NEW_AND_OLD_IMAGES,
      // Only the unprocessable-delivery items carry it (30 days); operations never expire.
      timeToLiveAttribute: TTL_ATTRIBUTE,
      ...durableTable,
    });
    // Sparse: only open, pollable operations carry its keys (see engines/dynamodb/tables.ts); what the dispatcher
    // groups by beside them, the record itself read by the worker's claim.
    this.table.addGlobalSecondaryIndex({
      indexName: OPEN_INDEX,
      partitionKey: { name: OPEN_INDEX_PARTITION, type: AttributeType.STRING },
      sortKey: { name: OPEN_INDEX_SORT, type: AttributeType.STRING },
      projectionType: ProjectionType.INCLUDE,
      nonKeyAttributes: OPEN_INDEX_PROJECTED,
    });
    // The schedule as stacks before open-by-due-v2 have it (every attribute projected), kept for one upgrading deploy.
    if (props.keepPreviousOpenIndex)
      this.table.addGlobalSecondaryIndex({
        indexName: PREVIOUS_OPEN_INDEX,
        partitionKey: { name: OPEN_INDEX_PARTITION, type: AttributeType.STRING },
        sortKey: { name: OPEN_INDEX_SORT, type: AttributeType.STRING },
      });
    // Sparse, keys only: observed open jobs by kind and when they were tracked (reconcile's overdue sweep).
    this.table.addGlobalSecondaryIndex({
      indexName: AGE_INDEX,
      partitionKey: { name: AGE_INDEX_PARTITION, type: AttributeType.STRING },
      sortKey: { name: AGE_INDEX_SORT, type: AttributeType.STRING },
      projectionType: ProjectionType.KEYS_ONLY,
    });
    // The unprocessable deliveries, newest first. It listed every operation once (`listPartition`, one value): now
    // none carries it (GET /operations reads the history table's index); kept as it was, so no deploy replaces it.
    this.table.addGlobalSecondaryIndex({
      indexName: LIST_INDEX,
      partitionKey: { name: LIST_INDEX_PARTITION, type: AttributeType.STRING },
      sortKey: { name: LIST_INDEX_SORT, type: AttributeType.STRING },
    });

    // Holds the `whsec_…` secret(s) Gemini returned when the webhook was created; set its value after the first deploy.
    const signingSecrets = new Secret(this, 'WebhookSigningSecrets', {
      description: 'Gemini webhook signing secrets (whsec_..., space-separated during rotation)',
      ...notConfiguredYet,
    });
    Validations.of(signingSecrets).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason: 'Gemini issues and rotates this secret (webhooks rotate_signing_secret); the value is copied here, not generated.',
    });

    const functionSettings = (fn: RatchetFunctionName) => ({
      memorySize: props.memoryMb?.[fn] ?? DEFAULT_MEMORY_MB[fn],
      tracing: props.tracing === 'all' || (fn === 'api' && (props.tracing ?? 'webhook') === 'webhook') ? Tracing.ACTIVE : Tracing.DISABLED,
      applicationLogLevelV2: ApplicationLogLevel[props.logLevel ?? 'INFO'],
      systemLogLevelV2: SystemLogLevel[props.platformLogLevel ?? 'WARN'],
    });
    this.eventBridgeSink = props.eventBridgeSink;

    this.apiFunction = new RatchetFunction(this, 'Api', {
      ...functionSettings('api'),
      entry: 'lambda/handlers/api.ts',
      description: 'Gemini and OpenAI webhooks and the operations API',
      // The webhook route is open: a flood must not take every concurrent execution of the account.
      ...(props.apiReservedConcurrency !== 0 && { reservedConcurrentExecutions: props.apiReservedConcurrency ?? 20 }),
      environment: {
        ...(props.geminiWebhookAudience && { GEMINI_WEBHOOK_AUDIENCE: props.geminiWebhookAudience }),
        ...(props.geminiWebhookSchemes && { GEMINI_WEBHOOK_SCHEMES: props.geminiWebhookSchemes.join(',') }),
      },
    })
      .bindTable('TABLE_NAME', this.table, ['GetItem', 'UpdateItem', 'BatchGetItem'])
      // The unprocessable deliveries' list (the operations' own is the history table's index).
      .bindIndex(this.table, LIST_INDEX, ['Query'])
      .bindSecret('WEBHOOK_SIGNING_SECRETS', signingSecrets);
    // OpenAI's and Azure OpenAI's webhooks, each checked against the secret the app named (none: 503 not-configured).
    if (props.openai?.webhookSecret) this.apiFunction.bindSecret('OPENAI_WEBHOOK_SECRET', props.openai.webhookSecret);
    if (props.azureOpenAI) {
      // The resource's name is in the jobs' names (azure-openai/{resource}/batches/{id}).
      this.apiFunction.addEnvironment('AZURE_OPENAI_ENDPOINT', props.azureOpenAI.endpoint);
      if (props.azureOpenAI.webhookSecret) this.apiFunction.bindSecret('AZURE_OPENAI_WEBHOOK_SECRET', props.azureOpenAI.webhookSecret);
    }

    const accessLogs = new LogGroup(this, 'ApiAccessLogs', { retention: RetentionDays.ONE_MONTH, removalPolicy: RemovalPolicy.RETAIN });
    this.api = new HttpApi(this, 'HttpApi', { description: 'Ratchet', createDefaultStage: false });
    const stage = new HttpStage(this, 'ApiStage', {
      httpApi: this.api,
      stageName: '$default',
      autoDeploy: true,
      throttle: { rateLimit: 200, burstLimit: 400 },
      accessLogSettings: { destination: new LogGroupLogDestination(accessLogs), format: ACCESS_LOG_FORMAT },
    });
    const integration = new HttpLambdaIntegration('ApiIntegration', this.apiFunction, { timeout: Duration.seconds(10) });
    const iam = new HttpIamAuthorizer();
    // Each webhook is authenticated by its Standard Webhooks signature, checked in the function.
    const open = [
      ...WEBHOOK_PATHS.flatMap((path) =>
        this.api.addRoutes({ path, methods: [HttpMethod.POST], integration, authorizer: new HttpNoneAuthorizer() }),
      ),
      ...this.api.addRoutes({ path: '/healthz', methods: [HttpMethod.GET], integration, authorizer: new HttpNoneAuthorizer() }),
    ];
    for (const route of open) {
      Validations.of(route).acknowledge({
        id: 'AwsSolutions-APIG4',
        reason:
          'Gemini and OpenAI cannot sign requests with IAM: each webhook is authenticated by its Standard Webhooks signature; healthz reveals nothing.',
      });
    }
    const guarded = [
      ...this.api.addRoutes({ path: '/operations', methods: [HttpMethod.POST, HttpMethod.GET], integration, authorizer: iam }),
      ...this.api.addRoutes({ path: '/operations/{name+}', methods: [HttpMethod.GET], integration, authorizer: iam }),
      ...this.api.addRoutes({ path: '/decisions', methods: [HttpMethod.GET], integration, authorizer: iam }),
    ];
    // Each route its own throttle: anonymous webhook traffic cannot use up what the IAM routes need, nor the reverse.
    const throttle = { ...DEFAULT_THROTTLING, ...props.throttling };
    const settings = (limit: RouteThrottle) => ({ ThrottlingRateLimit: limit.rateLimit, ThrottlingBurstLimit: limit.burstLimit });
    // Every webhook route the webhook's throttle, each its own: a flood of forged OpenAI deliveries leaves Gemini's room.
    const routeSettings: Record<string, unknown> = {
      ...Object.fromEntries(WEBHOOK_PATHS.map((path) => [`POST ${path}`, settings(throttle.webhook)])),
      'GET /healthz': settings(throttle.healthz),
    };
    for (const key of ['POST /operations', 'GET /operations', 'GET /operations/{name+}', 'GET /decisions'])
      routeSettings[key] = settings(throttle.operations);
    (stage.node.defaultChild as CfnStage).addPropertyOverride('RouteSettings', routeSettings);
    // The route settings name routes that must exist first.
    for (const route of [...open, ...guarded]) stage.node.addDependency(route);

    // Effects: the table's stream, filtered to applied state changes, in order, to the sinks.
    const ledger = new Table(this, 'EffectsLedger', {
      partitionKey: { name: LEDGER_PARTITION_KEY, type: AttributeType.STRING },
      timeToLiveAttribute: LEDGER_TTL_ATTRIBUTE,
      ...durableTable,
    });
    // Whole dead letters of the effects path (undecodable records with their raw image), kept 30 days.
    const deadLetters = new Table(this, 'EffectsDeadLetters', {
      partitionKey: { name: DEAD_LETTER_KEYS.partition, type: AttributeType.STRING },
      sortKey: { name: DEAD_LETTER_KEYS.sort, type: AttributeType.STRING },
      timeToLiveAttribute: DEAD_LETTER_TTL_ATTRIBUTE,
      ...durableTable,
    });
    this.bus = new EventBus(this, 'Events', { description: 'Ratchet: Operation State Changed' });
    // The per-operation effects queue: FIFO, one message group per operation (the record's effectsGroup).
    const effectsDlq = new Queue(this, 'EffectsDeadLetterQueue', {
      fifo: true,
      retentionPeriod: Duration.days(EFFECTS_QUEUE.retentionDays),
      ...durableQueue,
    });
    Validations.of(effectsDlq).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'This queue is the dead-letter queue of the effects queue.',
    });
    this.effectsQueue = new Queue(this, 'EffectsQueue', {
      fifo: true,
      // Deduplication by the stream record's eventID (set by the Pipe), not by content.
      contentBasedDeduplication: false,
      retentionPeriod: Duration.days(EFFECTS_QUEUE.retentionDays),
      // Six times the function's timeout, as AWS advises for an SQS event source.
      visibilityTimeout: Duration.minutes(6),
      ...durableQueue,
      deadLetterQueue: { queue: effectsDlq, maxReceiveCount: EFFECTS_QUEUE.maxReceiveCount },
    });
    // Records the Pipe itself could not send (the queue unavailable for its whole retry budget).
    const pipeFailures = new Queue(this, 'EffectsPipeFailures', {
      retentionPeriod: Duration.days(14),
      ...durableQueue,
    });
    Validations.of(pipeFailures).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'This queue is the dead-letter queue of the effects Pipe.',
    });

    // The table's stream -> the effects queue: AWS's own engine, filtered to applied state changes, in stream order.
    const pipeRole = new Role(this, 'EffectsPipeRole', { assumedBy: new ServicePrincipal('pipes.amazonaws.com') });
    pipeRole.addToPolicy(
      new PolicyStatement({
        actions: ['dynamodb:DescribeStream', 'dynamodb:GetRecords', 'dynamodb:GetShardIterator'],
        resources: [this.table.tableStreamArn as string],
      }),
    );
    // ListStreams (in AWS's list of a DynamoDB Pipe source's permissions) has no resource type: granted on a
    // stream's ARN, it allows nothing (test/integration/aws-iam.test.ts simulates it).
    pipeRole.addToPolicy(new PolicyStatement({ actions: ['dynamodb:ListStreams'], resources: ['*'] }));
    Validations.of(pipeRole).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason: 'dynamodb:ListStreams has no resource-level permissions.',
    });
    pipeRole.addToPolicy(
      new PolicyStatement({ actions: ['sqs:SendMessage'], resources: [this.effectsQueue.queueArn, pipeFailures.queueArn] }),
    );
    new CfnPipe(this, 'EffectsPipe', {
      roleArn: pipeRole.roleArn,
      source: this.table.tableStreamArn as string,
      sourceParameters: {
        dynamoDbStreamParameters: {
          startingPosition: 'TRIM_HORIZON',
          batchSize: EFFECTS_PIPE.batchSize,
          maximumRetryAttempts: EFFECTS_PIPE.retryAttempts,
          deadLetterConfig: { arn: pipeFailures.queueArn },
        },
        filterCriteria: { filters: [{ pattern: JSON.stringify(STATE_CHANGE_FILTER) }] },
      },
      target: this.effectsQueue.queueArn,
      targetParameters: {
        sqsQueueParameters: {
          messageGroupId: `$.dynamodb.NewImage.${EFFECTS_GROUP_ATTRIBUTE}.S`,
          messageDeduplicationId: '$.eventID',
        },
      },
    });

    this.effectsFunction = new RatchetFunction(this, 'Effects', {
      ...functionSettings('effects'),
      entry: 'lambda/handlers/effects.ts',
      description: 'Effects queue -> EventBridge and the outbound webhook, per operation in order, with backoff',
      timeout: Duration.seconds(60),
    })
      .bindTable('EFFECTS_LEDGER_TABLE', ledger, ['GetItem', 'PutItem'])
      .bindTable('EFFECTS_DEAD_LETTER_TABLE', deadLetters, ['Query', 'PutItem', 'DeleteItem']);
    this.effectsFunction.addEnvironment('EFFECTS_QUEUE_URL', this.effectsQueue.queueUrl);
    if (props.eventBridgeSink) this.turnOnEventBridgeSink();
    // The outbound webhook is configured in two secrets (`npm run connect -- --effects-url …`), not in the
    // template: a plain redeploy keeps it on, and the URL may carry a token.
    const effectsUrl = new Secret(this, 'EffectsWebhookUrl', {
      description: 'URL of the signed outbound effect webhook; not-configured: the sink is off',
      ...notConfiguredYet,
    });
    const effectsSecret = new Secret(this, 'EffectsSigningSecret', {
      description: 'Signs outbound effect webhooks (whsec_...)',
      ...notConfiguredYet,
    });
    for (const secret of [effectsUrl, effectsSecret]) {
      Validations.of(secret).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason: 'Shared with the receiver of the outbound webhook; rotate it together with the receiver (npm run connect).',
      });
    }
    this.effectsFunction.bindSecret('EFFECTS_WEBHOOK_URL', effectsUrl).bindSecret('EFFECTS_SIGNING_SECRET', effectsSecret);
    this.output('EffectsWebhookUrlSecretArn', effectsUrl.secretArn);
    this.output('EffectsSigningSecretArn', effectsSecret.secretArn);
    // The queue feeds the function. Not SqsEventSource: its grant adds GetQueueUrl, which nothing calls. Lambda's
    // poller needs receive, delete and the queue's attributes; the handler's backoff, change visibility.
    this.effectsFunction.addEventSourceMapping('EffectsQueueSource', {
      eventSourceArn: this.effectsQueue.queueArn,
      batchSize: EFFECTS_QUEUE.batchSize,
      reportBatchItemFailures: true,
    });
    this.effectsFunction.addToRolePolicy(
      new PolicyStatement({
        actions: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:ChangeMessageVisibility'],
        resources: [this.effectsQueue.queueArn],
      }),
    );

    // History: the table's stream (every applied write) -> its own table, for GET /operations/{name}/history.
    this.historyTable = new Table(this, 'History', {
      partitionKey: { name: HISTORY_PARTITION_KEY, type: AttributeType.STRING },
      sortKey: { name: HISTORY_SORT_KEY, type: AttributeType.NUMBER },
      timeToLiveAttribute: HISTORY_TTL_ATTRIBUTE,
      ...durableTable,
    });
    // GET /operations: each operation's latest item (version 0, no TTL) in one of 32 shards (LIST_SHARDS), newest first, with only
    // what the list's filters read projected (engines/dynamodb/tables.ts). Off the webhook's write path.
    this.historyTable.addGlobalSecondaryIndex({
      indexName: RECENT_INDEX,
      partitionKey: { name: RECENT_INDEX_PARTITION, type: AttributeType.STRING },
      sortKey: { name: RECENT_INDEX_SORT, type: AttributeType.STRING },
      projectionType: ProjectionType.INCLUDE,
      nonKeyAttributes: [...RECENT_INDEX_PROJECTION],
    });
    const historyTable = this.historyTable;
    const historyFailures = new Queue(this, 'HistoryFailures', {
      retentionPeriod: Duration.days(14),
      ...durableQueue,
    });
    Validations.of(historyFailures).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'This queue is the on-failure destination of the history stream mapping.',
    });
    this.historyFunction = new RatchetFunction(this, 'HistoryWriter', {
      ...functionSettings('history'),
      entry: 'lambda/handlers/history.ts',
      description: 'Table stream -> operation history (every applied write, idempotent per name#version) and the list of operations',
      timeout: Duration.seconds(30),
      environment: { HISTORY_RETENTION_DAYS: String(props.historyRetentionDays ?? DEFAULT_HISTORY_RETENTION_DAYS) },
    })
      // PutItem: an entry; UpdateItem: the operation's latest item, conditional on its version.
      .bindTable('HISTORY_TABLE', historyTable, ['PutItem', 'UpdateItem']);
    this.historyFunction.addEventSource(
      new DynamoEventSource(this.table, {
        startingPosition: StartingPosition.TRIM_HORIZON,
        batchSize: HISTORY_MAPPING.batchSize,
        retryAttempts: HISTORY_MAPPING.retryAttempts,
        bisectBatchOnError: true,
        maxRecordAge: Duration.days(1),
        reportBatchItemFailures: true,
        onFailure: sendOnly(historyFailures),
        filters: [FilterCriteria.filter(HISTORY_FILTER)],
      }),
    );
    // Query: an operation's history, and the list's index; the list's views are read from the table (BatchGetItem).
    this.apiFunction.bindTable('HISTORY_TABLE', historyTable, ['Query']).bindIndex(historyTable, RECENT_INDEX, ['Query']);

    // Reconcile: a schedule polls every provider with a credential for open operations, through the same ingest.
    const geminiApiKey = new Secret(this, 'GeminiApiKey', {
      description: 'Gemini API key used by reconcile to poll operations',
      ...notConfiguredYet,
    });
    Validations.of(geminiApiKey).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason: 'A Gemini API key is issued and rotated in Google AI Studio; the value is copied here.',
    });
    const reconcile = { ...DEFAULT_RECONCILE, ...props.reconcile };
    const interval = Duration.minutes(reconcile.intervalMinutes);
    // The poll queue: each message one provider+key's due jobs. Visibility six times the worker's timeout, as AWS
    // advises for an SQS event source; a message that failed five times is kept in its dead-letter queue.
    const pollDlq = new Queue(this, 'PollDeadLetterQueue', { retentionPeriod: Duration.days(14), ...durableQueue });
    Validations.of(pollDlq).acknowledge({ id: 'AwsSolutions-SQS3', reason: 'This queue is the dead-letter queue of the poll queue.' });
    this.pollQueue = new Queue(this, 'PollQueue', {
      visibilityTimeout: Duration.seconds(POLL_WORKER_TIMEOUT.toSeconds() * 6),
      // A job not polled by then is due again anyway (its lease is shorter): the dispatcher hands it out afresh.
      retentionPeriod: Duration.hours(1),
      ...durableQueue,
      deadLetterQueue: { queue: pollDlq, maxReceiveCount: 5 },
    });
    // The dispatcher: one run at a time, each done before the next is due, never retried. It hands the due jobs to
    // the poll queue and keeps the chores that run once (the overdue sweep, the hourly webhook health and discovery).
    this.reconcileFunction = new RatchetFunction(this, 'Reconcile', {
      ...functionSettings('reconcile'),
      entry: 'lambda/handlers/reconcile.ts',
      description: 'Reconcile dispatcher: hands the due jobs to the poll workers; overdue sweep, webhook health, discovery',
      timeout: interval.minus(Duration.seconds(5)),
      reservedConcurrentExecutions: 1,
      retryAttempts: 0,
      maxEventAge: interval,
      environment: {
        RECONCILE_INTERVAL_SECONDS: String(interval.toSeconds()),
        // Its hourly health check looks at the Gemini webhooks that point here.
        WEBHOOK_URL: `${this.api.apiEndpoint}/webhooks/gemini`,
        POLL_QUEUE_URL: this.pollQueue.queueUrl,
        // What the workers poll in about an interval (POLLS_AT_ONCE each, at 100 ms a poll): the queue holds no more.
        POLL_QUEUE_ROOM: String(reconcile.maxConcurrency * POLLS_AT_ONCE * 10 * interval.toSeconds()),
        // Upgrading: the index that is there for sure (the new one may still be filling).
        ...(props.keepPreviousOpenIndex && { OPEN_INDEX_NAME: PREVIOUS_OPEN_INDEX }),
      },
    })
      // The due query reads keys, kind and credential; the overdue sweep reads the age index (keys only), then each
      // job (GetItem) and marks it (UpdateItem); discovery adopts with the same conditional write.
      .bindTable('TABLE_NAME', this.table, ['GetItem', 'UpdateItem'])
      .bindIndex(this.table, props.keepPreviousOpenIndex ? PREVIOUS_OPEN_INDEX : OPEN_INDEX, ['Query'])
      .bindIndex(this.table, AGE_INDEX, ['Query'])
      .bindSecret('GEMINI_API_KEY', geminiApiKey);
    this.reconcileFunction.addToRolePolicy(
      new PolicyStatement({ actions: ['sqs:SendMessage', 'sqs:GetQueueAttributes'], resources: [this.pollQueue.queueArn] }),
    );
    // The poll worker: a lease (UpdateItem, the record with it) and the ingest's conditional writes, no reads.
    this.pollWorkerFunction = new RatchetFunction(this, 'PollWorker', {
      ...functionSettings('pollWorker'),
      entry: 'lambda/handlers/poll-worker.ts',
      description: 'Reconcile poll worker: leases and polls the due jobs of the poll queue, through the same ingest',
      timeout: POLL_WORKER_TIMEOUT,
      environment: { RECONCILE_INTERVAL_SECONDS: String(interval.toSeconds()) },
    })
      .bindTable('TABLE_NAME', this.table, ['UpdateItem'])
      .bindSecret('GEMINI_API_KEY', geminiApiKey);
    // Not SqsEventSource: its grant adds GetQueueUrl and ChangeMessageVisibility, which nothing calls here.
    this.pollWorkerFunction.addEventSourceMapping('PollQueueSource', {
      eventSourceArn: this.pollQueue.queueArn,
      batchSize: reconcile.batchSize,
      reportBatchItemFailures: true,
      maxConcurrency: reconcile.maxConcurrency,
    });
    this.pollWorkerFunction.addToRolePolicy(
      new PolicyStatement({
        actions: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
        resources: [this.pollQueue.queueArn],
      }),
    );
    const pollers = [this.reconcileFunction, this.pollWorkerFunction];
    let platformCredentials: Secret | undefined;
    if (props.agentPlatform) {
      platformCredentials = new Secret(this, 'AgentPlatformCredentials', {
        description: 'Agent Platform credentials JSON (service account key or workload identity federation) used by reconcile',
        ...notConfiguredYet,
      });
      Validations.of(platformCredentials).acknowledge({
        id: 'AwsSolutions-SMG4',
        reason: 'Google Cloud issues and rotates these credentials; the value is copied here.',
      });
      // The worker's alone: the Agent Platform sends no webhooks and nothing there is listed for discovery.
      this.pollWorkerFunction
        .bindSecret('AGENT_PLATFORM_CREDENTIALS', platformCredentials)
        .addEnvironment('GOOGLE_CLOUD_PROJECT', props.agentPlatform.project)
        .addEnvironment('GOOGLE_CLOUD_LOCATION', props.agentPlatform.location);
    }
    // The other providers: each polled (the worker) and listed for discovery (the dispatcher) with the key(s) in the
    // secret the app named, none without.
    for (const fn of pollers) {
      if (props.openai?.apiKeys) fn.bindSecret('OPENAI_API_KEY', props.openai.apiKeys);
      if (props.openai?.baseUrl) fn.addEnvironment('OPENAI_BASE_URL', props.openai.baseUrl);
      if (props.anthropic?.apiKeys) fn.bindSecret('ANTHROPIC_API_KEY', props.anthropic.apiKeys);
      if (props.anthropic?.baseUrl) fn.addEnvironment('ANTHROPIC_BASE_URL', props.anthropic.baseUrl);
      if (props.azureOpenAI?.apiKey)
        fn.addEnvironment('AZURE_OPENAI_ENDPOINT', props.azureOpenAI.endpoint).bindSecret('AZURE_OPENAI_API_KEY', props.azureOpenAI.apiKey);
    }
    // Bedrock with the worker's own role: read one batch inference job of this account and region, nothing else
    // (no listing: nothing adopts Bedrock's jobs by listing them; no other account's or region's job).
    const bedrockJobs = `arn:${Aws.PARTITION}:bedrock:${Aws.REGION}:${Aws.ACCOUNT_ID}:model-invocation-job/*`;
    this.pollWorkerFunction.addToRolePolicy(new PolicyStatement({ actions: ['bedrock:GetModelInvocationJob'], resources: [bedrockJobs] }));
    Validations.of(this.pollWorkerFunction.role as Role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:bedrock:<AWS::Region>:<AWS::AccountId>:model-invocation-job/*]',
      reason: "Bedrock's batch jobs are created by the app at run time: any job of this account and region, read only.",
    });
    this.bedrockEventsFunction = new RatchetFunction(this, 'BedrockEvents', {
      ...functionSettings('bedrockEvents'),
      entry: 'lambda/handlers/bedrock-events.ts',
      description: "Bedrock's batch inference job state changes -> the same ingest (a nudge: the poll after it decides)",
    })
      // UpdateItem alone: the ingest's conditional write hands back the stored item when it refuses, it never reads first.
      .bindTable('TABLE_NAME', this.table, ['UpdateItem']);
    // Bedrock sends these to the default bus (best effort, unordered); only its batch jobs' state changes.
    new Rule(this, 'BedrockJobStateChanges', {
      description: "Bedrock's batch inference job state changes -> Ratchet",
      eventPattern: { source: [BEDROCK_EVENT_SOURCE], detailType: [BEDROCK_EVENT_DETAIL_TYPE] },
      targets: [new LambdaFunction(this.bedrockEventsFunction)],
    });

    // A JWT-signed delivery is verified by polling: the API wakes the dispatcher at once (an asynchronous invocation).
    this.apiFunction.addEnvironment('RECONCILE_FUNCTION_NAME', this.reconcileFunction.functionName);
    this.apiFunction.addToRolePolicy(
      new PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [this.reconcileFunction.functionArn] }),
    );
    new Rule(this, 'ReconcileSchedule', {
      description: 'Runs reconcile',
      schedule: Schedule.rate(interval),
      targets: [new LambdaFunction(this.reconcileFunction, { retryAttempts: 0, maxEventAge: interval })],
    });

    this.alarms = new RatchetAlarms(this, 'Monitoring', {
      api: this.api,
      functions: {
        Api: this.apiFunction,
        Effects: this.effectsFunction,
        Reconcile: this.reconcileFunction,
        PollWorker: this.pollWorkerFunction,
        History: this.historyFunction,
        BedrockEvents: this.bedrockEventsFunction,
      },
      historyFailures,
      effectsQueue: this.effectsQueue,
      effectsDeadLetterQueue: effectsDlq,
      pollDeadLetterQueue: pollDlq,
      pipeFailures,
      ...(props.alarmEmail && { alarmEmail: props.alarmEmail }),
    });

    this.output('AlarmTopicArn', this.alarms.topic.topicArn);
    this.output('ApiUrl', this.apiUrl);
    this.output('WebhookUrl', this.webhookUrl);
    this.output('OpenAIWebhookUrl', this.openaiWebhookUrl);
    if (props.azureOpenAI) this.output('AzureOpenAIWebhookUrl', this.azureOpenAIWebhookUrl);
    this.output('WebhookSigningSecretArn', signingSecrets.secretArn);
    this.output('TableName', this.table.tableName);
    this.output('HistoryTableName', this.historyTable.tableName);
    this.output('EventBusName', this.bus.eventBusName);
    this.output('GeminiApiKeySecretArn', geminiApiKey.secretArn);
    if (platformCredentials) this.output('AgentPlatformCredentialsSecretArn', platformCredentials.secretArn);
    this.output('EffectsQueueUrl', this.effectsQueue.queueUrl);
    this.output('EffectsDeadLetterQueueUrl', effectsDlq.queueUrl);
    this.output('EffectsDeadLetterTable', deadLetters.tableName);
  }

  /** Lets `grantee` track jobs: `execute-api:Invoke` on `POST /operations` only. */
  grantTrack(grantee: IGrantable): Grant {
    return this.grantInvoke(grantee, [['POST', '/operations']]);
  }

  /** Lets `grantee` read jobs: `execute-api:Invoke` on `GET /operations` and `GET /operations/…` (record and history) only. */
  grantRead(grantee: IGrantable): Grant {
    return this.grantInvoke(grantee, [
      ['GET', '/operations'],
      ['GET', '/operations/*'],
    ]);
  }

  /**
   * A rule on Ratchet's bus sending each matching state change to `target`
   * (any EventBridge target: a function, a queue, a state machine…). The
   * event's `detail` is the change: name, kind, state, previousState,
   * version, result, userMetadata, idempotencyKey (docs: the contract).
   */
  onStateChange(id: string, target: IRuleTarget, filter: StateChangeFilter = {}): Rule {
    return this.rule(id, target, filter, EVENTBRIDGE_DETAIL_TYPE, 'state changes');
  }

  /**
   * A rule sending each job found open past its kind's limit (OVERDUE_AFTER on
   * the reconcile function) to `target`, once per job: the `operation.overdue`
   * effect, its `detail` the job as it stood with `overdue` ({at, afterSeconds, openSince}).
   */
  onOverdue(id: string, target: IRuleTarget, filter: Omit<StateChangeFilter, 'states'> = {}): Rule {
    return this.rule(id, target, filter, EVENTBRIDGE_OVERDUE_DETAIL_TYPE, 'overdue jobs');
  }

  /** The effects function puts each effect on the bus too (EVENT_BUS_NAME and PutEvents on it, nothing else): once. */
  private turnOnEventBridgeSink(): void {
    if (this.eventBridgeSinkOn) return;
    this.eventBridgeSinkOn = true;
    this.effectsFunction.addEnvironment('EVENT_BUS_NAME', this.bus.eventBusName);
    this.bus.grantPutEventsTo(this.effectsFunction);
  }

  private rule(id: string, target: IRuleTarget, filter: StateChangeFilter, detailType: string, what: string): Rule {
    if (this.eventBridgeSink === false)
      throw new Error(`${id}: eventBridgeSink is false, so nothing is put on Ratchet's bus and this rule would never match`);
    this.turnOnEventBridgeSink();
    const detail: Record<string, string[]> = {};
    if (filter.kinds) detail.kind = filter.kinds;
    if (filter.states) detail.state = filter.states;
    if (filter.names) detail.name = filter.names;
    for (const [key, values] of Object.entries(detail)) {
      if (values.length === 0) throw new Error(`${id}: an empty ${key} list would match nothing; leave it out to match any`);
    }
    return new Rule(this, id, {
      eventBus: this.bus,
      description: `Ratchet ${what} -> ${id}`,
      eventPattern: {
        source: [EVENTBRIDGE_SOURCE],
        detailType: [detailType],
        ...(Object.keys(detail).length > 0 && { detail }),
      },
      targets: [target],
    });
  }

  private grantInvoke(grantee: IGrantable, routes: Array<[string, string]>): Grant {
    return Grant.addToPrincipal({
      grantee,
      actions: ['execute-api:Invoke'],
      resourceArns: routes.map(([method, path]) => this.api.arnForExecuteApi(method, path, '$default')),
    });
  }

  /**
   * A stack output under its plain key (`ApiUrl`, …), wherever the construct
   * sits: `npm run connect -- --stack` and `npm run aws -- redrive --stack` read
   * them by that key. So one Ratchet per stack.
   */
  private output(key: string, value: string): void {
    new CfnOutput(this, key, { value }).overrideLogicalId(key);
  }
}

/** An on-failure destination that grants SendMessage only (CDK's SqsDlq adds GetQueueAttributes and GetQueueUrl, which Lambda does not call). */
function sendOnly(queue: IQueue): IEventSourceDlq {
  return {
    bind(_mapping, fn) {
      fn.addToRolePolicy(new PolicyStatement({ actions: ['sqs:SendMessage'], resources: [queue.queueArn] }));
      return { destination: queue.queueArn };
    },
  };
}
