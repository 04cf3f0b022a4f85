/**
 * The cost model: what a shape of the stack costs per million webhook events
 * (and per million polls), line by line, at the published us-east-1 prices.
 * Pure arithmetic over counts per event; bench/aws-cost.ts measures the counts
 * on moto and prints the shapes side by side.
 */

export interface Price {
  /** Dollars per `per` units. */
  usd: number;
  per: number;
  unit: string;
  source: string;
  /** When it was read, and how far it was confirmed. */
  checked: string;
}

const READ = '2026-12-07';

/** us-east-1, on demand, past any free tier, in the first volume tier. */
export const PRICES = {
  apiGateway: {
    usd: 1.0,
    per: 1e6,
    unit: 'HTTP API requests (first 300 million a month, each 512 KB)',
    source: 'https://aws.amazon.com/api-gateway/pricing/',
    checked: `${READ}: the figure the issue used; the page itself not reached here`,
  },
  lambdaRequests: {
    usd: 0.2,
    per: 1e6,
    unit: 'Lambda requests',
    source: 'https://aws.amazon.com/lambda/pricing/',
    checked: `${READ}: confirmed by third-party summaries of the page (cloudchipr.com, 2024-2026)`,
  },
  lambdaArmGbSecond: {
    usd: 0.0000133334,
    per: 1,
    unit: 'Lambda GB-seconds on arm64 (first 7.5 billion a month)',
    source: 'https://aws.amazon.com/lambda/pricing/',
    checked: `${READ}: confirmed by third-party summaries of the page (cloudchipr.com)`,
  },
  dynamodbWrite: {
    usd: 0.625,
    per: 1e6,
    unit: 'DynamoDB on-demand write request units',
    source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
    checked: `${READ}: the price since the cut of November 2024 (the issue's $2.19 = 3.5 units x $0.625); some third-party pages still show $1.25`,
  },
  dynamodbRead: {
    usd: 0.125,
    per: 1e6,
    unit: 'DynamoDB on-demand read request units (one strongly consistent read up to 4 KB)',
    source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
    checked: `${READ}: as the write price, halved with it in November 2024; not confirmed on the page here`,
  },
  pipes: {
    usd: 0.4,
    per: 1e6,
    unit: 'EventBridge Pipes requests (after filtering, 64 KB each)',
    source: 'https://aws.amazon.com/eventbridge/pricing/',
    checked: `${READ}: confirmed by third-party summaries (cloudburn.io, March 2026)`,
  },
  sqsFifo: {
    usd: 0.5,
    per: 1e6,
    unit: 'SQS FIFO requests (64 KB each)',
    source: 'https://aws.amazon.com/sqs/pricing/',
    checked: `${READ}: not confirmed here (from memory of the page)`,
  },
  eventBridgeEvents: {
    usd: 1.0,
    per: 1e6,
    unit: 'EventBridge custom events (64 KB each)',
    source: 'https://aws.amazon.com/eventbridge/pricing/',
    checked: `${READ}: confirmed by third-party summaries (cloudburn.io, March 2026)`,
  },
  xrayTraces: {
    usd: 5.0,
    per: 1e6,
    unit: 'X-Ray traces recorded (past 100,000 a month)',
    source: 'https://aws.amazon.com/xray/pricing/',
    checked: `${READ}: not confirmed here (from memory of the page)`,
  },
  logsIngestion: {
    usd: 0.5,
    per: 1e9,
    unit: 'CloudWatch Logs ingestion, GB (Lambda logs: first tier)',
    source: 'https://aws.amazon.com/cloudwatch/pricing/',
    checked: `${READ}: confirmed by third-party summaries (hykell.com; Duckbill on Lambda's tiered log pricing of May 2025)`,
  },
  secretsManager: {
    usd: 0.05,
    per: 1e4,
    unit: 'Secrets Manager API calls',
    source: 'https://aws.amazon.com/secrets-manager/pricing/',
    checked: `${READ}: not confirmed here (from memory of the page)`,
  },
} as const satisfies Record<string, Price>;

export type PriceName = keyof typeof PRICES;

/** One function's part of an event. */
export interface FunctionShare {
  name: string;
  /** Invocations per event. */
  invocations: number;
  /** Billed seconds per invocation. */
  seconds: number;
  memoryMb: number;
  /** Log bytes per event (its own lines, EMF included, and the platform's where kept). */
  logBytes: number;
  /** Active tracing: Lambda records its own sample. */
  traced: boolean;
}

/** What one webhook event makes the stack do, on average (all per event). */
export interface Shape {
  label: string;
  apiRequests: number;
  functions: FunctionShare[];
  /** API Gateway's access log line, bytes per request. */
  accessLogBytes: number;
  /** Write units per table or index (`Operations/recent-by-recorded`). */
  writeUnits: Record<string, number>;
  readUnits: Record<string, number>;
  pipeRequests: number;
  sqsRequests: number;
  eventBridgeEvents: number;
  secretsCalls: number;
  /** Events a second: Lambda samples the first invocation each second of each function, then 5 %. */
  eventsPerSecond: number;
}

export interface Line {
  what: string;
  /** Units per million events. */
  quantity: number;
  usd: number;
  price: PriceName;
}

/** Traces Lambda records per invocation at `perSecond` invocations a second: the first each second, then 5 % of the rest. */
export function tracedShare(perSecond: number): number {
  if (perSecond <= 1) return 1;
  return (1 + 0.05 * (perSecond - 1)) / perSecond;
}

const sum = (values: Record<string, number>) => Object.values(values).reduce((a, b) => a + b, 0);

/** The shape's cost per million events, line by line. */
export function costLines(shape: Shape): Line[] {
  const M = 1e6;
  const line = (what: string, price: PriceName, perEvent: number): Line => {
    const quantity = perEvent * M;
    return { what, quantity, usd: (quantity * PRICES[price].usd) / PRICES[price].per, price };
  };
  const lines = [line('API Gateway HTTP API requests', 'apiGateway', shape.apiRequests)];
  for (const fn of shape.functions) lines.push(line(`Lambda requests: ${fn.name}`, 'lambdaRequests', fn.invocations));
  for (const fn of shape.functions)
    lines.push(line(`Lambda GB-s: ${fn.name}`, 'lambdaArmGbSecond', fn.invocations * fn.seconds * (fn.memoryMb / 1024)));
  for (const [target, units] of Object.entries(shape.writeUnits)) lines.push(line(`DynamoDB writes: ${target}`, 'dynamodbWrite', units));
  for (const [target, units] of Object.entries(shape.readUnits)) lines.push(line(`DynamoDB reads: ${target}`, 'dynamodbRead', units));
  lines.push(line('EventBridge Pipe (stream -> effects queue)', 'pipes', shape.pipeRequests));
  lines.push(line('SQS FIFO requests (send, receive, delete, visibility)', 'sqsFifo', shape.sqsRequests));
  lines.push(line('EventBridge custom events (the EventBridge sink)', 'eventBridgeEvents', shape.eventBridgeEvents));
  const traces = shape.functions
    .filter((fn) => fn.traced)
    .reduce((total, fn) => total + fn.invocations * tracedShare(shape.eventsPerSecond * fn.invocations), 0);
  lines.push(line('X-Ray traces recorded', 'xrayTraces', traces));
  for (const fn of shape.functions) lines.push(line(`CloudWatch Logs: ${fn.name}`, 'logsIngestion', fn.logBytes));
  lines.push(line('CloudWatch Logs: API access log', 'logsIngestion', shape.apiRequests * shape.accessLogBytes));
  lines.push(line('Secrets Manager calls (each environment every 5 min)', 'secretsManager', shape.secretsCalls));
  return lines;
}

export const totalOf = (lines: Line[]) => lines.reduce((total, l) => total + l.usd, 0);

export const writeUnitsOf = (shape: Shape) => sum(shape.writeUnits);

/**
 * One poll of an open job, as the fan-out shapes it (the lead plugs in the merged numbers): a share of a worker
 * invocation, its write units (the lease and the next due time, indexes included), its queue requests, and the dispatcher's
 * reads. Per poll.
 */
export interface PollShape {
  pollsPerInvocation: number;
  /** Billed seconds of one worker invocation. */
  invocationSeconds: number;
  memoryMb: number;
  writeUnits: number;
  readUnits: number;
  /** SQS requests per poll (a batch's send, receive and delete, shared by its polls). */
  sqsRequests: number;
  logBytes: number;
}

/** A poll's cost per million polls, line by line. */
export function pollCostLines(poll: PollShape): Line[] {
  const M = 1e6;
  const line = (what: string, price: PriceName, perPoll: number): Line => {
    const quantity = perPoll * M;
    return { what, quantity, usd: (quantity * PRICES[price].usd) / PRICES[price].per, price };
  };
  const invocations = 1 / poll.pollsPerInvocation;
  return [
    line('Lambda requests: poll worker', 'lambdaRequests', invocations),
    line('Lambda GB-s: poll worker', 'lambdaArmGbSecond', invocations * poll.invocationSeconds * (poll.memoryMb / 1024)),
    line('DynamoDB writes: the lease and the next due time', 'dynamodbWrite', poll.writeUnits),
    line('DynamoDB reads: the due buckets', 'dynamodbRead', poll.readUnits),
    line('SQS requests', 'sqsFifo', poll.sqsRequests),
    line('CloudWatch Logs', 'logsIngestion', poll.logBytes),
  ];
}
