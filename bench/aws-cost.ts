/**
 * The AWS section's cost per million webhook events (`npm run bench`, section
 * `aws`): the stack's counts measured on moto (bench/aws-cost-run.ts), priced
 * line by line (bench/aws-cost-model.ts), three shapes side by side:
 * - today's: the stack as it was at the start of this work (commit 1627b29:
 *   512 MB, X-Ray on every function, both sinks, two ledger writes an effect,
 *   an EMF line per value, the platform's lines), from counts measured on it
 *   then (bench/aws-cost-baseline.json);
 * - the lean default, measured now;
 * - the lean default with the EventBridge sink on, measured now.
 * Then the cost per million polls of an open job, an estimate from the poll
 * shape below (the reconcile fan-out's numbers go there).
 *
 * BENCH_COST_JOBS (jobs per run, default 100), BENCH_EVENTS_PER_SECOND (the
 * traffic X-Ray's sampling is figured at, default 100).
 */
import { readFileSync } from 'node:fs';
import { startMoto } from '../test/support/aws/moto.ts';
import type { FunctionName } from '../test/support/aws/stack-on-moto.ts';
import { costLines, type FunctionShare, type Line, type PollShape, PRICES, pollCostLines, type Shape, totalOf } from './aws-cost-model.ts';
import { type Measured, measureStack, type PhaseCounts } from './aws-cost-run.ts';

const JOBS = Number(process.env.BENCH_COST_JOBS ?? 100);
const EVENTS_PER_SECOND = Number(process.env.BENCH_EVENTS_PER_SECOND ?? 100);

/**
 * The Lambda platform's lines per invocation at INFO, JSON format: platform.start (about 130 bytes) and
 * platform.report (about 330, with its tracing field): estimated from their documented shapes, not measured here.
 */
const PLATFORM_BYTES_PER_INVOCATION = 460;

/** One access log line of the template's format, with a request's usual values (`lib/ratchet.ts`, ACCESS_LOG_FORMAT). */
const ACCESS_LOG_BYTES = JSON.stringify({
  requestId: 'Q2mF3hHyoAMEbKw=',
  time: '07/Dec/2026:14:00:00 +0000',
  ip: '203.0.113.17',
  route: 'POST /webhooks/gemini',
  status: '200',
  responseLength: '412',
  latencyMs: '38',
  integrationLatencyMs: '35',
  integrationStatus: '200',
  integrationError: '-',
  error: '-',
}).length;

/** At 1,769 MB a function has one vCPU; below, a share in proportion (https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html). */
const ONE_VCPU_MB = 1769;
/** One request to DynamoDB, SQS or EventBridge in the region: an assumption (DynamoDB answers in single-digit ms). */
const AWS_ROUND_TRIP_MS = 5;
/** The outbound webhook's receiver answering: the app's, an assumption. */
const RECEIVER_MS = 50;

/**
 * An invocation's billed duration, modelled rather than timed (moto's answers, slow and one at a time, and this
 * shared machine would decide a wall-clock figure): the handler's CPU time here stretched to the function's CPU
 * share at its memory, plus a round trip per AWS request it made (in turn: an upper bound for the effects function,
 * whose operations go side by side) and the receiver's answer per outbound webhook; rounded up to the millisecond.
 */
function billedSeconds(name: string, counts: PhaseCounts['functions'][FunctionName], memoryMb: number, webhooks: number): number {
  if (counts.invocations === 0) return 0;
  const cpuShare = Math.min(1, memoryMb / ONE_VCPU_MB);
  const waits = counts.awsCalls * AWS_ROUND_TRIP_MS + (name === 'Effects' ? webhooks * RECEIVER_MS : 0);
  return Math.ceil((counts.cpuMs / cpuShare + waits) / counts.invocations) / 1000;
}

/** How long a function keeps a secret's value before asking Secrets Manager again (lambda/secrets.ts). */
const SECRET_CACHE_SECONDS = 300;

/**
 * Secrets Manager calls per event, amortised: the run had one environment per function, which asked once per
 * secret; in AWS each environment asks again every cache period, and a function keeps about its concurrency's worth
 * of environments (rate x duration).
 */
function secretsPerEvent(callsInRun: number, functions: FunctionShare[], eventsPerSecond: number): number {
  const environments = Math.max(...functions.map((fn) => Math.max(1, Math.ceil(eventsPerSecond * fn.invocations * fn.seconds))));
  return (callsInRun * environments) / (eventsPerSecond * SECRET_CACHE_SECONDS);
}

/** A measured run as the model's shape: every count per webhook event. */
export function shapeOf(label: string, measured: Measured, eventsPerSecond = EVENTS_PER_SECOND): Shape {
  const phase: PhaseCounts = measured.webhooks;
  const per = (n: number) => n / phase.events;
  const functions: FunctionShare[] = (['Api', 'Effects', 'HistoryWriter'] as const).map((name) => {
    const counts = phase.functions[name];
    const settings = measured.settings[name];
    const platform = ['WARN', 'ERROR', 'FATAL'].includes(settings.systemLogLevel ?? 'INFO') ? 0 : PLATFORM_BYTES_PER_INVOCATION;
    return {
      name,
      invocations: per(counts.invocations),
      seconds: billedSeconds(name, counts, settings.memoryMb, phase.effects),
      memoryMb: settings.memoryMb,
      logBytes: per(counts.stdoutBytes + counts.invocations * platform),
      traced: settings.tracing === 'Active',
    };
  });
  const calls = (prefix: string) =>
    Object.entries(phase.calls)
      .filter(([key]) => key.startsWith(prefix))
      .reduce((total, [, n]) => total + n, 0);
  // A refused conditional write (a redelivery, an older report) still costs a write unit; it leaves no stream record.
  const refused = calls('dynamodb:UpdateItem Operations') - phase.operationsRecords;
  const writeUnits = Object.fromEntries(Object.entries(phase.writeUnits).map(([target, units]) => [target, per(units)]));
  writeUnits['Operations (refused writes)'] = per(refused);
  return {
    label,
    apiRequests: 1,
    functions,
    accessLogBytes: ACCESS_LOG_BYTES,
    writeUnits,
    readUnits: Object.fromEntries(Object.entries(phase.readUnits).map(([target, units]) => [target, per(units)])),
    pipeRequests: per(phase.pipeRecords),
    // The Pipe's SendMessage per record; Lambda's poller a receive and a batch delete per invocation; the backoffs.
    sqsRequests: per(phase.pipeRecords + 2 * phase.functions.Effects.invocations + calls('sqs:')),
    eventBridgeEvents: per(calls('events:PutEvents')),
    secretsCalls: secretsPerEvent(calls('secretsmanager:'), functions, eventsPerSecond),
    eventsPerSecond,
  };
}

/**
 * One poll of an open job that changes nothing, as the fan-out does it (lambda/reconcile/fanout.ts, the default
 * props): a worker invocation takes 10 messages of 50 jobs, 500 polls, at about 126 a second against a provider
 * answering in 100 ms (bench/aws-reconcile.ts, docs/benchmarks.md): about 4 s at 512 MB. Each poll writes the
 * lease and then the next due time, each 1 unit on the table and 2 on `open-by-due-v2` (its sort key moves): 6 units
 * (docs/design.md, "The AWS tables' capacity"). The dispatcher's Query reads the job's index entry (about 120
 * bytes, eventually consistent: half a unit per 4 KB). SQS: the dispatcher's SendMessageBatch (10 messages), the
 * event source's receive and delete, about 3 requests per 500 jobs (a standard queue, priced here at the FIFO rate:
 * an upper bound). Logs: the worker's one summary line and one EMF line per invocation, about 1 KB per 500 polls.
 */
export const POLL_ESTIMATE: PollShape = {
  pollsPerInvocation: 500,
  invocationSeconds: 4,
  memoryMb: 512,
  writeUnits: 6,
  readUnits: (120 / 4096) * 0.5,
  sqsRequests: 3 / 500,
  logBytes: 1000 / 500,
};

const money = (usd: number) => `$${usd.toFixed(3)}`;

function printSideBySide(shapes: Shape[]): void {
  const priced = shapes.map((shape) => costLines(shape));
  const order: string[] = [];
  for (const lines of priced) for (const line of lines) if (!order.includes(line.what)) order.push(line.what);
  const width = Math.max(...order.map((what) => what.length));
  console.log(`\n  Cost per million webhook events (us-east-1, history and the outbound webhook on, ${EVENTS_PER_SECOND} events/s)`);
  console.log(`  ${''.padEnd(width)}  ${shapes.map((shape) => shape.label.padStart(16)).join('')}`);
  for (const what of order) {
    const cells = priced.map((lines) => lines.find((line: Line) => line.what === what)?.usd ?? 0);
    if (cells.every((usd) => usd < 0.0005)) continue;
    console.log(`  ${what.padEnd(width)}  ${cells.map((usd) => money(usd).padStart(16)).join('')}`);
  }
  console.log(`  ${'total'.padEnd(width)}  ${priced.map((lines) => money(totalOf(lines)).padStart(16)).join('')}`);
  console.log('\n  Settings and counts per event');
  for (const shape of shapes) {
    const fns = shape.functions
      .map(
        (fn) =>
          `${fn.name} ${fn.invocations.toFixed(2)}x ${fn.memoryMb} MB ${(fn.seconds * 1000).toFixed(0)} ms ${fn.logBytes.toFixed(0)} B${fn.traced ? ' traced' : ''}`,
      )
      .join('; ');
    const writes = Object.values(shape.writeUnits).reduce((a, b) => a + b, 0);
    const reads = Object.values(shape.readUnits).reduce((a, b) => a + b, 0);
    console.log(
      `  ${shape.label}: ${fns}; ${writes.toFixed(2)} write units, ${reads.toFixed(2)} read units, ${shape.sqsRequests.toFixed(2)} SQS requests`,
    );
  }
}

function printPolls(): void {
  const lines = pollCostLines(POLL_ESTIMATE);
  const perMillion = totalOf(lines);
  console.log('\n  Cost per million polls of an open job that change nothing (the fan-out, as shaped: bench/aws-cost.ts, POLL_ESTIMATE)');
  for (const line of lines) console.log(`  ${line.what.padEnd(40)} ${money(line.usd).padStart(10)}`);
  console.log(`  ${'total'.padEnd(40)} ${money(perMillion).padStart(10)}`);
  for (const minutes of [30, 60]) {
    const polls = (30 * 24 * 60) / minutes;
    console.log(`  a million open jobs for a month, polled every ${minutes} min: ${polls} million polls, ${money(perMillion * polls)}`);
  }
}

function printPrices(): void {
  console.log('\n  Prices');
  for (const price of Object.values(PRICES))
    console.log(`  $${price.usd} per ${price.per.toLocaleString('en')} ${price.unit}: ${price.source} (${price.checked})`);
}

const today = JSON.parse(readFileSync(new URL('./aws-cost-baseline.json', import.meta.url), 'utf8')) as Measured;
const moto = await startMoto();
try {
  const lean = await measureStack(moto.endpoint, {}, JOBS);
  const leanWithBus = await measureStack(moto.endpoint, { eventBridgeSink: true }, JOBS);
  printSideBySide([shapeOf('today (1627b29)', today), shapeOf('lean default', lean), shapeOf('lean + EventBridge', leanWithBus)]);
  const ran = Object.entries(lean.webhooks.functions).filter(([, counts]) => counts.invocations > 0);
  console.log(`  peak RSS per bundle, lean default (MB): ${ran.map(([fn, counts]) => `${fn} ${counts.maxRssMb.toFixed(0)}`).join(', ')}`);
  printPolls();
  printPrices();
} finally {
  await moto.stop();
}
