/**
 * An HTTP proxy in front of moto that writes down every AWS call made
 * through it, as IAM sees it: the action (`dynamodb:UpdateItem`) and the
 * resource's ARN (the table, the index, the secret, the queue, the bus, the
 * function). A Lambda invocation is answered here (202, as for an `Event`
 * invocation), since moto's Lambda needs Docker; everything else goes on to moto.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MOTO_ACCOUNT, MOTO_REGION } from './moto.ts';

export interface AwsCall {
  /** `service:Action`, as in a policy. */
  action: string;
  resource: string;
  /** The caller's AWS_SDK_UA_APP_ID (letters, digits, `_`), which the SDK puts in its user agent (`app/<id>`). */
  caller?: string;
  /** A DynamoDB PutItem's item (DynamoDB JSON) and a read's consistency: what its capacity is computed from (bench/aws-cost.ts). */
  item?: Record<string, unknown>;
  consistentRead?: boolean;
}

const PREFIXES: Record<string, string> = {
  DynamoDB_20120810: 'dynamodb',
  secretsmanager: 'secretsmanager',
  AWSEvents: 'events',
  AmazonSQS: 'sqs',
};
type RequestBody = {
  TableName?: string;
  Item?: Record<string, unknown>;
  ConsistentRead?: boolean;
  IndexName?: string;
  RequestItems?: Record<string, unknown>;
  SecretId?: string;
  Entries?: Array<{ EventBusName?: string }>;
  QueueUrl?: string;
};
const arn = (service: string, resource: string) => `arn:aws:${service}:${MOTO_REGION}:${MOTO_ACCOUNT}:${resource}`;

/** The ARN IAM authorizes `action` against, read from the request body. */
function resourceOf(service: string, action: string, body: RequestBody): string[] {
  if (service === 'dynamodb') {
    if (typeof body.TableName === 'string')
      return [arn('dynamodb', `table/${body.TableName}${body.IndexName ? `/index/${body.IndexName}` : ''}`)];
    // BatchGetItem, BatchWriteItem: authorized on each table named.
    if (body.RequestItems) return Object.keys(body.RequestItems).map((table) => arn('dynamodb', `table/${table}`));
    return ['*']; // ListTables and the like
  }
  if (service === 'secretsmanager')
    return [String(body.SecretId).startsWith('arn:') ? String(body.SecretId) : arn('secretsmanager', `secret:${body.SecretId}`)];
  if (service === 'events') {
    const buses = new Set((body.Entries ?? []).map((entry) => entry.EventBusName ?? 'default'));
    return [...buses].map((bus) => (bus.startsWith('arn:') ? bus : arn('events', `event-bus/${bus}`)));
  }
  if (service === 'sqs') return [body.QueueUrl ? arn('sqs', new URL(body.QueueUrl).pathname.split('/').pop() as string) : '*'];
  throw new Error(`${service}:${action} is not recorded here`);
}

/** SQS's batch calls, each authorized as the single action it batches (IAM has no action of their name). */
const BATCH_ACTIONS: Record<string, string> = {
  SendMessageBatch: 'SendMessage',
  DeleteMessageBatch: 'DeleteMessage',
  ChangeMessageVisibilityBatch: 'ChangeMessageVisibility',
};

const ITEM_OPERATIONS = new Set(['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'Query', 'Scan', 'BatchGetItem', 'BatchWriteItem']);

export class RecordingProxy {
  readonly calls: AwsCall[] = [];
  private server?: Server;

  /** `delayMs`: added before each forwarded request, to model the network round trip to AWS (moto answers on loopback). */
  constructor(
    private readonly target: string,
    private readonly delayMs = 0,
  ) {}

  /** Item requests (GetItem, UpdateItem, Query, …) against `table` or its indexes since the last reset: counted, not estimated. */
  requests(table: string): number {
    return this.calls.filter(
      (call) => ITEM_OPERATIONS.has(call.action.replace(/^dynamodb:/, '')) && /:table\/([^/]+)/.exec(call.resource)?.[1] === table,
    ).length;
  }

  reset(): void {
    this.calls.length = 0;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${((this.server as Server).address() as AddressInfo).port}`;
  }

  async start(): Promise<this> {
    const target = new URL(this.target);
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', async () => {
        if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
        const body = Buffer.concat(chunks);
        const agent = `${req.headers['user-agent'] ?? ''} ${req.headers['x-amz-user-agent'] ?? ''}`;
        // Powertools appends its own tag to the app id (`app/Api-PT-…`): the id is what comes before the first dash.
        const caller = agent.match(/(?:^|\s)app\/([A-Za-z0-9_]+)/)?.[1];
        const invoke = req.url?.match(/^\/2015-03-31\/functions\/([^/]+)\/invocations/);
        if (invoke) {
          const name = decodeURIComponent(invoke[1] as string);
          this.calls.push({
            action: 'lambda:InvokeFunction',
            resource: name.startsWith('arn:') ? name : arn('lambda', `function:${name}`),
            caller,
          });
          res.writeHead(202, { 'content-type': 'application/json' }).end();
          return;
        }
        const [prefix, action] = String(req.headers['x-amz-target'] ?? '').split('.');
        const service = PREFIXES[prefix ?? ''];
        if (service && action) {
          const request = JSON.parse(body.toString() || '{}') as RequestBody;
          for (const resource of resourceOf(service, action, request))
            this.calls.push({
              action: `${service}:${BATCH_ACTIONS[action] ?? action}`,
              resource,
              caller,
              ...(request.Item && { item: request.Item }),
              ...(request.ConsistentRead && { consistentRead: true }),
            });
        } else this.calls.push({ action: `unrecognized:${req.method} ${req.url}`, resource: '*' });
        const upstream = request(
          { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 500, answer.headers);
            answer.pipe(res);
          },
        );
        upstream.on('error', () => res.writeHead(502).end());
        upstream.end(body);
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
