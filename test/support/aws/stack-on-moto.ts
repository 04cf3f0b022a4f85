/**
 * The synthesized stack run as AWS would run it, on moto: its tables,
 * secrets, queues and bus provisioned from the template; each function a
 * warm Lambda environment running its bundle from `cdk.out` with the
 * environment the template gives it; and, in place of the AWS services moto
 * cannot run, small stand-ins driven by the template's own settings:
 * - API Gateway: an HTTP server that hands each request to the API bundle
 *   as an HTTP API payload v2 event;
 * - the effects Pipe: reads the table's stream from moto, keeps the records
 *   its filter pattern (the JSON in the template) matches, and sends each to
 *   moto's SQS FIFO queue with the template's group and deduplication ids;
 * - the SQS event sources: receive batches from the effects queue (and the
 *   poll queue) and invoke the effects bundle (the poll worker's), deleting
 *   what it did not report failed (the effects handler's own
 *   ChangeMessageVisibility is its backoff);
 * - the history stream mapping, with its template filter;
 * - the schedule: reconcile's dispatcher invoked on a timer.
 * Every AWS call the bundles make goes through a recording proxy in front of
 * moto, so a test can count them.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DeleteMessageCommand, type Message, ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type {
  APIGatewayProxyEventV2,
  APIGatewayProxyStructuredResultV2,
  DynamoDBBatchResponse,
  SQSBatchResponse,
  SQSRecord,
} from 'aws-lambda';
import { keyedTableInput } from '../../../engines/dynamodb/index.ts';
import { silentLogger } from '../silent-logger.ts';
import { LambdaHost } from './lambda-host.ts';
import { MOTO_CREDENTIALS, MOTO_REGION, publishStackOutputs } from './moto.ts';
import { RecordingProxy } from './recording-proxy.ts';
import { verifySigV4 } from './sigv4-verifier.ts';
import { LocalStreamMapping } from './stream-mapping.ts';
import type { Synthesized } from './synth.ts';
import { ensureTable } from './tables.ts';
import { TemplateWorld } from './template.ts';

export const FUNCTIONS = ['Api', 'Effects', 'HistoryWriter', 'Reconcile', 'PollWorker'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];

export interface StackOnMotoOptions {
  /** Secret values by the secret's logical id prefix (`WebhookSigningSecrets`, `EffectsWebhookUrl`, …). */
  secrets: Record<string, string>;
  /** Variables beyond the template's, per function (fast backoffs, the fake Gemini's URL). */
  env?: Partial<Record<FunctionName, Record<string, string>>>;
  /**
   * The functions log and publish metrics as deployed (the template's application log level, as Lambda hands it
   * to them in AWS_LAMBDA_LOG_LEVEL), and each host counts its stdout's bytes: what CloudWatch Logs would ingest.
   */
  logs?: boolean;
  /** How often the schedule invokes reconcile. */
  reconcileEveryMs: number;
  /**
   * Callers known to IAM (access key id → secret): when given, the routes the template marks
   * `AWS_IAM` need their SigV4 signature, as API Gateway's IAM authorizer does; without it, no route does.
   */
  iamCallers?: Record<string, string>;
  /** false: no effects Pipe and no effects event source (a test of the tables alone); on by default. */
  effects?: boolean;
}

/** `$.a.b.c`, as the Pipe reads its target parameters from a record. */
export const jsonPath = (path: string, value: unknown): string =>
  String(
    path
      .replace(/^\$\./, '')
      .split('.')
      .reduce((node, key) => (node as Record<string, unknown>)?.[key], value),
  );

/**
 * What a function's process sees when deployed: the template's variables
 * (resolved to moto's names), the role's credentials in the environment, and
 * here every AWS endpoint pointed at the recording proxy in front of moto.
 */
export function deployedEnvironment(world: TemplateWorld, fn: FunctionName, motoEndpoint: string, proxyEndpoint: string) {
  // A queue URL names moto's host, which the SQS client would call directly: through the proxy instead.
  const env = Object.fromEntries(Object.entries(world.environment(fn)).map(([k, v]) => [k, v.replaceAll(motoEndpoint, proxyEndpoint)]));
  return {
    ...env,
    AWS_ENDPOINT_URL: proxyEndpoint,
    AWS_ACCESS_KEY_ID: 'ASIAEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'secret',
    AWS_SESSION_TOKEN: 'session',
    // In the SDK's user agent: the recording proxy tells the functions' calls apart by it.
    AWS_SDK_UA_APP_ID: fn,
  };
}

type Filter = Record<string, never>;
const filterOf = (criteria: unknown): Filter => {
  const filters = (criteria as { Filters: Array<{ Pattern: string }> }).Filters;
  if (filters.length !== 1) throw new Error(`expected one filter pattern, found ${filters.length}`);
  return JSON.parse((filters[0] as { Pattern: string }).Pattern);
};

export class StackOnMoto {
  readonly world: TemplateWorld;
  readonly proxy: RecordingProxy;
  readonly hosts = {} as Record<FunctionName, LambdaHost>;
  /** Invocations of the effects, reconcile or poll worker bundle that threw (Lambda would count them as errors). */
  readonly errors: Error[] = [];
  /** Receives and deletes of the stand-in SQS poller that failed. */
  readonly pollerErrors: Error[] = [];
  private readonly dynamodb: DynamoDBClient;
  private readonly sqs: SQSClient;
  private readonly mappings: LocalStreamMapping[] = [];
  private server?: Server;
  private stopped = false;
  private readonly loops: Promise<void>[] = [];
  /** Ends the schedule's wait for its next run (stop does not wait out a long interval). */
  private wakeSchedule?: () => void;

  constructor(
    private readonly synthesized: Synthesized,
    private readonly motoEndpoint: string,
    private readonly options: StackOnMotoOptions,
  ) {
    this.world = new TemplateWorld(synthesized.template, motoEndpoint, `stack${Date.now().toString(36)}`);
    this.proxy = new RecordingProxy(motoEndpoint);
    const config = { endpoint: motoEndpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS };
    this.dynamodb = new DynamoDBClient(config);
    this.sqs = new SQSClient(config);
  }

  get apiUrl(): string {
    return `http://127.0.0.1:${((this.server as Server).address() as AddressInfo).port}`;
  }

  async start(): Promise<this> {
    const { world } = this;
    await world.provision();
    await this.proxy.start();
    for (const [prefix, value] of Object.entries(this.options.secrets)) await world.putSecret(prefix, value);
    for (const fn of FUNCTIONS)
      this.hosts[fn] = new LambdaHost(
        fn,
        this.synthesized.bundleOf(fn),
        {
          ...deployedEnvironment(world, fn, this.motoEndpoint, this.proxy.endpoint),
          ...(this.options.logs && this.logLevelOf(fn)),
          ...this.options.env?.[fn],
        },
        { logs: this.options.logs ?? false },
      );
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', async () => {
        const url = new URL(req.url ?? '/', `http://${req.headers.host}`);
        const body = Buffer.concat(chunks);
        const refusal = await this.authorize(req.method ?? 'GET', url, req.headers as Record<string, string>, body.toString('utf8'));
        if (refusal) {
          res.writeHead(403, { 'content-type': 'application/json' }).end(JSON.stringify({ message: refusal }));
          return;
        }
        try {
          const answer = await this.hosts.Api.invoke<APIGatewayProxyStructuredResultV2>(
            apiEvent(req.method ?? 'GET', url, req.headers, body),
          );
          res.writeHead(answer.statusCode ?? 200, answer.headers as Record<string, string>);
          res.end(answer.body === undefined ? undefined : Buffer.from(answer.body, answer.isBase64Encoded ? 'base64' : 'utf8'));
        } catch {
          // A function error: API Gateway answers 500 for it.
          res.writeHead(500, { 'content-type': 'application/json' }).end('{"message":"Internal Server Error"}');
        }
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    if (this.options.effects !== false) {
      await this.startPipe();
      this.loops.push(this.sqsEventSource('Effects'));
    }
    await this.startHistoryMapping();
    this.loops.push(this.sqsEventSource('PollWorker'), this.schedule());
    return this;
  }

  /** What Lambda sets for a function whose JSON log settings name an application log level. */
  private logLevelOf(fn: FunctionName): Record<string, string> {
    const properties = this.world.resource(this.world.logicalId('AWS::Lambda::Function', fn)).Properties as {
      LoggingConfig?: { ApplicationLogLevel?: string };
    };
    const level = properties.LoggingConfig?.ApplicationLogLevel;
    return level ? { AWS_LAMBDA_LOG_LEVEL: level } : {};
  }

  /** Why API Gateway would refuse this request before the function (IAM authorization), or undefined. */
  private async authorize(method: string, url: URL, headers: Record<string, string>, body: string): Promise<string | undefined> {
    const callers = this.options.iamCallers;
    if (!callers) return undefined;
    const route = this.world
      .ofType('AWS::ApiGatewayV2::Route')
      .map(([, route]) => route.Properties as { RouteKey: string; AuthorizationType?: string })
      .find(({ RouteKey }) => {
        const [routeMethod, pattern] = RouteKey.split(' ') as [string, string];
        const path = new RegExp(`^${pattern.replace(/\{[^}]+\+\}/g, '.+').replace(/\{[^}]+\}/g, '[^/]+')}$`);
        return routeMethod === method && path.test(url.pathname);
      });
    if (route?.AuthorizationType !== 'AWS_IAM') return undefined;
    const verdict = await verifySigV4({ method, url, headers, body }, callers);
    return verdict === 'ok' ? undefined : 'Forbidden';
  }

  /**
   * The stack's outputs in moto's CloudFormation under `stackName`, as `cdk deploy` leaves them (the API's URLs
   * are this stand-in's), for the operator tools that read them (`npm run aws -- redrive --stack`, `npm run connect`).
   */
  async publishOutputs(stackName: string): Promise<void> {
    const outputs = Object.fromEntries(
      Object.entries(this.world.template.Outputs ?? {}).map(([key, output]) => [key, String(this.world.resolve(output.Value))]),
    );
    outputs.ApiUrl = this.apiUrl;
    outputs.WebhookUrl = `${this.apiUrl}/webhooks/gemini`;
    await publishStackOutputs(this.motoEndpoint, stackName, outputs);
  }

  private async mapping(
    id: string,
    filter: Filter,
    batchSize: number,
    handler: ConstructorParameters<typeof LocalStreamMapping>[0]['handler'],
  ): Promise<void> {
    const stateTableName = `${this.world.resolve({ Ref: this.operationsTable })}-${id}`;
    await ensureTable(this.dynamodb, keyedTableInput(stateTableName));
    const mapping = new LocalStreamMapping({
      client: this.dynamodb,
      documents: DynamoDBDocumentClient.from(this.dynamodb),
      endpoint: this.motoEndpoint,
      tableName: String(this.world.resolve({ Ref: this.operationsTable })),
      stateTableName,
      handler,
      filter,
      logger: silentLogger,
      batchSize,
      retryAttempts: 100,
      retryBaseMs: 100,
      pollMs: 100,
    });
    mapping.start();
    this.mappings.push(mapping);
  }

  private get operationsTable(): string {
    return this.world.logicalId('AWS::DynamoDB::Table', 'Operations');
  }

  /** The effects Pipe, from its template: source filter, batch size, target queue, group and deduplication ids. */
  /** The effects Pipe, from its template: source filter and batch size; each record sent as `pipeMessage` builds it. */
  private async startPipe(): Promise<void> {
    const pipe = this.world.resource('EffectsPipe').Properties as {
      SourceParameters: { FilterCriteria: unknown; DynamoDBStreamParameters: { BatchSize: number } };
    };
    const { FilterCriteria, DynamoDBStreamParameters } = pipe.SourceParameters;
    await this.mapping('pipe', filterOf(FilterCriteria), DynamoDBStreamParameters.BatchSize, async (event) => {
      for (const record of event.Records) await this.sqs.send(pipeMessage(this.world, record));
      return { batchItemFailures: [] };
    });
  }

  private async startHistoryMapping(): Promise<void> {
    const history = this.world.resolve({ Ref: this.world.logicalId('AWS::Lambda::Function', 'HistoryWriter') });
    const [, mapping] = this.world
      .ofType('AWS::Lambda::EventSourceMapping')
      .find(([, m]) => this.world.resolve(m.Properties.FunctionName) === history) as [string, { Properties: Record<string, unknown> }];
    await this.mapping('history', filterOf(mapping.Properties.FilterCriteria), Number(mapping.Properties.BatchSize), (event) =>
      this.hosts.HistoryWriter.invoke<DynamoDBBatchResponse>(event),
    );
  }

  /** Lambda's SQS poller for a function, with the mapping's batch size and partial batch responses. */
  private async sqsEventSource(fn: 'Effects' | 'PollWorker'): Promise<void> {
    const target = this.world.resolve({ Ref: this.world.logicalId('AWS::Lambda::Function', fn) });
    const [, mapping] = this.world
      .ofType('AWS::Lambda::EventSourceMapping')
      .find(([, m]) => this.world.resolve(m.Properties.FunctionName) === target) as [string, { Properties: Record<string, unknown> }];
    const queueArn = String(this.world.resolve(mapping.Properties.EventSourceArn));
    const queueUrl = this.world.queueUrl(queueArn);
    const partial = (mapping.Properties.FunctionResponseTypes as string[] | undefined)?.includes('ReportBatchItemFailures') === true;
    while (!this.stopped) {
      try {
        await this.pollQueue(fn, queueUrl, queueArn, Number(mapping.Properties.BatchSize), partial);
      } catch (error) {
        // Lambda's poller goes on after a failed receive or delete; a test sees it in `pollerErrors`.
        this.pollerErrors.push(error as Error);
        await new Promise((resolve) => setTimeout(resolve, 500));
      }
    }
  }

  private async pollQueue(
    fn: 'Effects' | 'PollWorker',
    queueUrl: string,
    queueArn: string,
    batchSize: number,
    partial: boolean,
  ): Promise<void> {
    {
      const { Messages = [] } = await this.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: batchSize,
          WaitTimeSeconds: 0,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      if (Messages.length === 0) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        return;
      }
      const records = Messages.map((message) => toSqsRecord(message, queueArn));
      let failed: Set<string>;
      try {
        const response = await this.hosts[fn].invoke<SQSBatchResponse>({ Records: records });
        failed = new Set(partial ? response.batchItemFailures.map((failure) => failure.itemIdentifier) : []);
      } catch (error) {
        // A function error: the whole batch stays, offered again after the visibility timeout.
        this.errors.push(error as Error);
        return;
      }
      for (const record of records)
        if (!failed.has(record.messageId))
          await this.sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: record.receiptHandle }));
    }
  }

  private async schedule(): Promise<void> {
    while (!this.stopped) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, this.options.reconcileEveryMs);
        this.wakeSchedule = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      if (this.stopped) break;
      // A failed run is counted, and the schedule goes on, as EventBridge's would.
      await this.hosts.Reconcile.invoke({ source: 'aws.events', 'detail-type': 'Scheduled Event' }).catch((error) =>
        this.errors.push(error),
      );
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeSchedule?.();
    await Promise.allSettled(this.loops);
    for (const mapping of this.mappings) await mapping.stop();
    for (const host of Object.values(this.hosts)) await host.stop();
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
    await this.proxy.stop();
    this.dynamodb.destroy();
    this.sqs.destroy();
  }
}

/**
 * What the template's effects Pipe sends for a stream record: to its target
 * queue, with its group and deduplication ids read from the record by the
 * template's paths (and, for a redrive, message attributes).
 */
export function pipeMessage(world: TemplateWorld, record: unknown, attributes: Record<string, string> = {}): SendMessageCommand {
  const pipe = world.resource('EffectsPipe').Properties as {
    Target: unknown;
    TargetParameters: { SqsQueueParameters: { MessageGroupId: string; MessageDeduplicationId: string } };
  };
  const { MessageGroupId, MessageDeduplicationId } = pipe.TargetParameters.SqsQueueParameters;
  return new SendMessageCommand({
    QueueUrl: world.queueUrl(String(world.resolve(pipe.Target))),
    MessageBody: JSON.stringify(record),
    MessageGroupId: jsonPath(MessageGroupId, record),
    MessageDeduplicationId: jsonPath(MessageDeduplicationId, record),
    ...(Object.keys(attributes).length > 0 && {
      MessageAttributes: Object.fromEntries(Object.entries(attributes).map(([k, v]) => [k, { DataType: 'String', StringValue: v }])),
    }),
  });
}

/** A received message as Lambda's SQS event source hands it to a function. */
export function toSqsRecord(message: Message, queueArn: string): SQSRecord {
  return {
    messageId: message.MessageId as string,
    receiptHandle: message.ReceiptHandle as string,
    body: message.Body as string,
    attributes: message.Attributes as unknown as SQSRecord['attributes'],
    messageAttributes: Object.fromEntries(
      Object.entries(message.MessageAttributes ?? {}).map(([k, v]) => [k, { stringValue: v.StringValue, dataType: 'String' }]),
    ) as SQSRecord['messageAttributes'],
    md5OfBody: message.MD5OfBody as string,
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: MOTO_REGION,
  };
}

/** An HTTP API (payload v2) event for a request, as API Gateway builds it. */
function apiEvent(method: string, url: URL, headers: Record<string, string | string[] | undefined>, body: Buffer): APIGatewayProxyEventV2 {
  const single = Object.fromEntries(
    Object.entries(headers).flatMap(([k, v]) => (v === undefined ? [] : [[k.toLowerCase(), Array.isArray(v) ? v.join(',') : v]])),
  );
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    headers: single,
    requestContext: {
      accountId: '123456789012',
      apiId: 'api',
      domainName: 'api.execute-api.us-east-1.amazonaws.com',
      domainPrefix: 'api',
      http: { method, path: url.pathname, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: single['user-agent'] ?? '' },
      requestId: `req-${Date.now()}`,
      routeKey: '$default',
      stage: '$default',
      time: new Date().toUTCString(),
      timeEpoch: Date.now(),
    },
    // API Gateway passes a text body (JSON here) as is; only binary bodies come base64-encoded.
    ...(body.length > 0 && { body: body.toString('utf8') }),
    isBase64Encoded: false,
  };
}
