/**
 * `npm run bench`: every figure docs/benchmarks.md reports, measured side by side in
 * one run (these machines are shared and noisy: read the ratios).
 *
 * 1. The embedded engine (bench/embedded.ts): Ratchet on SQLite, the seed on
 *    SQLite, the floor, and with BENCH_COMPARE_REF the runtime at that ref,
 *    fed by a load generator of its own; effect lag at BENCH_LAG_RATE
 *    deliveries/s; overload at 2x and 4x; RSS; time to the ready line.
 * 2. The change feed (bench/feed.ts): watch lag at 10 and 500 deliveries/s;
 *    the webhook path's throughput and RSS with 1,000 long polls and 100
 *    streams held, beside none.
 * 3. The packages (bench/packages.ts): each tarball installed alone, and the
 *    installed server's time to its ready line beside this checkout's.
 * 4. The AWS path: the write units per change and per poll, table and
 *    indexes, and the hottest partition (bench/aws-capacity.ts); what a
 *    million webhook events cost, three shapes side by side, from the
 *    stack's own bundles on moto (bench/aws-cost.ts);
 *    reconcile's poll worker, its polls a second and a million open jobs'
 *    sweep (bench/aws-reconcile.ts); then (bench/aws-path.ts) DynamoDB
 *    requests per delivery and throughput against the seed on moto, the
 *    indexes' write cost, then each Lambda bundle's size and cold start.
 * 5. Inline answers (bench/inline-answers.ts): one poll of an Omni video
 *    interaction whose video comes back inline, by its size.
 * 6. PostgreSQL (bench/postgres.ts): one and three instances beside SQLite
 *    and the seed; effect and watch lag across instances.
 * 6b. PostgreSQL at network distance (bench/postgres-distance.ts): one
 *    instance beside the seed's recipe and beside itself without effects on
 *    the same server, here and each through a proxy of its own 1 ms away
 *    each way, the proxy's own added latency measured beside every figure;
 *    CPU of each system's own backends; statements and buffers per delivery;
 *    the effects' claims' buffers per effect.
 * 7. Inside your app (bench/library.ts): createRatchet's cold start beside a
 *    hello-world handler; the webhook's answer time in library mode.
 * 8. Metrics and traces (bench/telemetry.ts): the webhook path with
 *    OpenTelemetry off and on, one delivery's recording cost, and
 *    `GET /metrics` with 100,000 stored operations on SQLite and PostgreSQL.
 * 9. Providers (bench/providers.ts): a mixed-provider storm (a third each
 *    Gemini webhooks, OpenAI webhooks, Anthropic batches tracked) beside the
 *    Gemini-only storm (BENCH_SIZE deliveries each), alternating rounds:
 *    deliveries/s, CPU per delivery (the follow-up polls and outcome writes
 *    included), lost, the ratios; each third alone; a paced control.
 *
 * BENCH_SECTIONS (embedded,postgres,postgres-distance,library,feed,telemetry,providers,packages,gemini,aws), BENCH_READY_RUNS (5), BENCH_SIZE (deliveries per mix, 500),
 * BENCH_ROUNDS (3), BENCH_LAG_RATE (1000), BENCH_LAG_COUNT (2000), BENCH_RSS_COUNT (100000),
 * BENCH_OVERLOAD_SECONDS (5),
 * BENCH_COLD_RUNS (5; 0 skips bundles), BENCH_COMPARE_REF (unset), BENCH_PG_LAG_RATE (500), BENCH_LIBRARY_RUNS (7), BENCH_LIBRARY_COUNT (2000),
 * BENCH_DYNAMODB_LATENCY_MS (0; e.g. 4 models DynamoDB's network round trip), BENCH_SCRAPE_OPERATIONS (100000).
 */
// Set before anything logs: the bench prints its own tables only.
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { resolve } from 'node:path';
import { benchEmbedded } from './embedded.ts';

const SECTIONS = ['embedded', 'postgres', 'postgres-distance', 'library', 'feed', 'telemetry', 'providers', 'packages', 'gemini', 'aws'];
const USAGE = `usage: [BENCH_SECTIONS=${SECTIONS.join(',')}] [BENCH_SIZE=500] [BENCH_ROUNDS=3] … npm run bench
Every setting is an environment variable; bench/index.ts's first comment lists them with their defaults, docs/benchmarks.md what each section prints.`;
/** Bad usage: one line, exit 2. */
function refuse(problem: string): never {
  console.error(`bench: ${problem} (npm run bench -- --help)`);
  process.exit(2);
}
const [argument] = process.argv.slice(2);
if (argument === '--help' || argument === '-h') {
  console.log(USAGE);
  process.exit(0);
}
if (argument !== undefined) refuse(`no arguments, settings are environment variables: ${argument}`);
const sections = (process.env.BENCH_SECTIONS ?? SECTIONS.join(',')).split(',');
const unknown = sections.filter((s) => !SECTIONS.includes(s));
if (unknown.length > 0) refuse(`BENCH_SECTIONS names no section ${unknown.join(', ')}; the sections: ${SECTIONS.join(', ')}`);
for (const [name, value] of Object.entries(process.env))
  if (
    /^BENCH_(SIZE|ROUNDS|LAG_RATE|LAG_COUNT|RSS_COUNT|OVERLOAD_SECONDS|READY_RUNS|COLD_RUNS|PG_LAG_RATE|LIBRARY_RUNS|LIBRARY_COUNT|DYNAMODB_LATENCY_MS|SCRAPE_OPERATIONS)$/.test(
      name,
    ) &&
    !(Number(value) >= 0)
  )
    refuse(`${name} must be a number ≥ 0, not ${JSON.stringify(value)}`);
if (sections.includes('embedded')) {
  await benchEmbedded({
    root: resolve(import.meta.dirname, '..'),
    size: Number(process.env.BENCH_SIZE ?? 500),
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
    compareRef: process.env.BENCH_COMPARE_REF,
    lagRate: Number(process.env.BENCH_LAG_RATE ?? 1000),
    lagCount: Number(process.env.BENCH_LAG_COUNT ?? 2000),
    rssCount: Number(process.env.BENCH_RSS_COUNT ?? 100_000),
    overloadSeconds: Number(process.env.BENCH_OVERLOAD_SECONDS ?? 5),
  });
}
/** Both PostgreSQL sections' settings. */
const postgresOptions = {
  root: resolve(import.meta.dirname, '..'),
  size: Number(process.env.BENCH_SIZE ?? 500),
  rounds: Number(process.env.BENCH_ROUNDS ?? 3),
  lagRate: Number(process.env.BENCH_PG_LAG_RATE ?? 500),
  lagCount: Number(process.env.BENCH_LAG_COUNT ?? 2000),
};
if (sections.includes('postgres')) {
  const { benchPostgres } = await import('./postgres.ts');
  await benchPostgres(postgresOptions);
}
if (sections.includes('postgres-distance')) {
  const { benchPostgresDistance } = await import('./postgres-distance.ts');
  await benchPostgresDistance(postgresOptions);
}
if (sections.includes('library')) {
  const { benchLibrary } = await import('./library.ts');
  await benchLibrary({
    root: resolve(import.meta.dirname, '..'),
    runs: Number(process.env.BENCH_LIBRARY_RUNS ?? 7),
    count: Number(process.env.BENCH_LIBRARY_COUNT ?? 2000),
  });
}
if (sections.includes('feed')) {
  const { benchFeed } = await import('./feed.ts');
  await benchFeed({
    root: resolve(import.meta.dirname, '..'),
    size: Number(process.env.BENCH_SIZE ?? 500) * 4,
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
  });
}
if (sections.includes('telemetry')) {
  const { benchTelemetry } = await import('./telemetry.ts');
  await benchTelemetry({
    root: resolve(import.meta.dirname, '..'),
    size: Number(process.env.BENCH_SIZE ?? 500) * 2,
    rounds: Number(process.env.BENCH_ROUNDS ?? 3) * 2,
    operations: Number(process.env.BENCH_SCRAPE_OPERATIONS ?? 100_000),
  });
}
if (sections.includes('providers')) {
  const { benchProviders } = await import('./providers.ts');
  await benchProviders({
    root: resolve(import.meta.dirname, '..'),
    size: Number(process.env.BENCH_SIZE ?? 500),
    rounds: Number(process.env.BENCH_ROUNDS ?? 3),
  });
}
if (sections.includes('packages')) {
  const { benchPackages } = await import('./packages.ts');
  await benchPackages(resolve(import.meta.dirname, '..'), Number(process.env.BENCH_READY_RUNS ?? 5));
}
if (sections.includes('gemini')) {
  const { benchInlineAnswers } = await import('./inline-answers.ts');
  await benchInlineAnswers();
}
// The AWS part ends the process when it is done (esbuild's service would hold it open).
if (sections.includes('aws')) {
  await import('./aws-capacity.ts');
  await import('./aws-reconcile.ts');
  await import('./aws-cost.ts');
  await import('./aws-path.ts');
} else process.exit(0);
