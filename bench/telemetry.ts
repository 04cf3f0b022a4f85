/**
 * Metrics and traces (`BENCH_SECTIONS=telemetry`), side by side in one run:
 * - the webhook path's throughput and CPU per delivery (the storm mix, sink
 *   on, SQLite) with OpenTelemetry off and on (OTLP over http/protobuf to a
 *   collector in this process), rounds interleaved;
 * - what recording one delivery costs in process: the Prometheus registry
 *   alone (OpenTelemetry off: the SDK not even loaded), and with
 *   OpenTelemetry's metrics and a delivery's two spans beside it;
 * - `GET /metrics` with 100,000 stored operations (5 % open) on SQLite and on
 *   PostgreSQL: the scrape's time, from the request to the last byte.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { allOf, type Telemetry } from '../app/telemetry.ts';
import { Sqlite } from '../engines/sqlite/sqlite.ts';
import { startOpenTelemetry } from '../local/telemetry/otel.ts';
import { PrometheusMetrics } from '../local/telemetry/prometheus.ts';
import { newSecret } from '../test/support/deliveries.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { Receiver } from '../test/support/receiver.ts';
import { silentLogger } from '../test/support/silent-logger.ts';
import { percentile } from './mixes.ts';
import { type Started, settled, startGenerator, startProcess, stopProcess, treeCpuMs } from './processes.ts';

export interface TelemetryBenchOptions {
  root: string;
  size: number;
  rounds: number;
  /** Stored operations for the scrape (100,000). */
  operations: number;
}

const TOKEN = 'bench-api-token-0123456789abcdef';
const READY = /Ratchet ready at (http:\/\/\S+) /;
const KINDS = ['batch', 'video', 'interaction', 'operation'];

export async function benchTelemetry(options: TelemetryBenchOptions): Promise<void> {
  const { root } = options;
  const secret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  let exportedBytes = 0;
  const collector = createServer((request, response) => {
    request.on('data', (chunk: Buffer) => {
      exportedBytes += chunk.length;
    });
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end());
  });
  await new Promise<void>((done) => collector.listen(0, '127.0.0.1', done));
  const collectorUrl = `http://127.0.0.1:${(collector.address() as AddressInfo).port}`;
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-telemetry-'));
  const generator = startGenerator(root);
  const started: Started[] = [];
  const start = (env: Record<string, string>) =>
    startProcess(
      [process.execPath, '--import', 'tsx', 'local/start.ts'],
      { PORT: '0', WEBHOOK_SIGNING_SECRETS: secret, RATCHET_API_TOKEN: TOKEN, TRACK_RATE_PER_MINUTE: '1000000', ...env },
      READY,
      root,
    ).then((one) => {
      started.push(one);
      return one;
    });
  try {
    const sink = { EFFECTS_WEBHOOK_URL: receiver.url, EFFECTS_SIGNING_SECRET: outbound };
    const off = await start({ ...sink, DATA_DIR: join(work, 'off') });
    const on = await start({
      ...sink,
      DATA_DIR: join(work, 'on'),
      OTEL_EXPORTER_OTLP_ENDPOINT: collectorUrl,
      OTEL_METRIC_EXPORT_INTERVAL: '5000',
    });
    const systems = { off, on };
    const play = async (system: 'off' | 'on', prefix: string) => {
      const one = systems[system];
      const pid = one.child.pid as number;
      const before = treeCpuMs(pid);
      const played = await generator.play(`${one.url}/webhooks/gemini`, secret, prefix, options.size, 1);
      await settled(pid);
      return { perSecond: played.perSecond, p99: played.p99, cpu: (treeCpuMs(pid) - before) / options.size };
    };
    for (const system of ['off', 'on'] as const) for (let i = 0; i < 2; i++) await play(system, `warm-${system}-${i}`);
    const samples = { off: [] as Array<Awaited<ReturnType<typeof play>>>, on: [] as Array<Awaited<ReturnType<typeof play>>> };
    for (let round = 0; round < options.rounds; round++)
      for (const system of round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const))
        samples[system].push(await play(system, `${system}-${round}`));
    const median = (system: 'off' | 'on', field: 'perSecond' | 'p99' | 'cpu') =>
      percentile(
        samples[system].map((s) => s[field]),
        0.5,
      );
    console.log('\n## Metrics and traces\n');
    console.log(
      `The storm mix, ${options.size} deliveries, ${options.rounds} interleaved rounds (medians), SQLite, sink on, Node ${process.version}; OpenTelemetry on: OTLP http/protobuf to a collector on 127.0.0.1 (${(exportedBytes / 1024).toFixed(0)} KB received over the run)\n`,
    );
    console.log('| OpenTelemetry | deliveries/s | ×off | p99 ms | CPU ms per delivery (both processes) |');
    console.log('|---|---:|---:|---:|---:|');
    for (const system of ['off', 'on'] as const)
      console.log(
        `| ${system} | ${median(system, 'perSecond').toFixed(0)} | ${(median(system, 'perSecond') / median('off', 'perSecond')).toFixed(2)} | ${median(system, 'p99').toFixed(1)} | ${median(system, 'cpu').toFixed(2)} |`,
      );
    for (const one of started.splice(0)) await stopProcess(one);

    await recordingCost(collectorUrl);
    await scrapes(options, start, work);
  } finally {
    for (const one of started) await stopProcess(one);
    generator.stop();
    await receiver.stop();
    collector.close();
    rmSync(work, { recursive: true, force: true });
  }
}

/** Microseconds to record one delivery as the webhook path does, without OpenTelemetry and with it. */
async function recordingCost(collectorUrl: string): Promise<void> {
  const count = 200_000;
  const timeIt = (telemetry: Telemetry) => {
    const started = performance.now();
    for (let i = 0; i < count; i++) {
      const webhook = telemetry.span?.('ratchet.webhook', {});
      const write = webhook && telemetry.span?.('ratchet.write', { 'ratchet.operation.name': `batches/b${i % 1000}` }, webhook);
      write?.traceparent();
      write?.end();
      telemetry.webhook({ decision: 'applied', reason: '' }, 0.004);
      webhook?.end();
    }
    return ((performance.now() - started) * 1000) / count;
  };
  const prometheus = new PrometheusMetrics();
  // The exporters read the process's environment: the collector's address for this measurement only.
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = collectorUrl;
  const otel = startOpenTelemetry(silentLogger);
  delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
  const both = allOf(prometheus, otel.telemetry);
  timeIt(prometheus);
  timeIt(both);
  const offUs = timeIt(prometheus);
  const onUs = timeIt(both);
  await otel.shutdown();
  console.log(
    `\nRecording one delivery in process (${count.toLocaleString('en')} times, after a warm-up): OpenTelemetry off ${offUs.toFixed(2)} µs (the Prometheus registry alone; the SDK not loaded); on ${onUs.toFixed(2)} µs (its metrics and the delivery's two spans, batched for export).`,
  );
}

/** `GET /metrics` with `options.operations` stored (5 % open), on SQLite and on PostgreSQL. */
async function scrapes(
  options: TelemetryBenchOptions,
  start: (env: Record<string, string>) => Promise<Started>,
  work: string,
): Promise<void> {
  const n = options.operations;
  const time = async (url: string) => {
    const times: number[] = [];
    for (let i = 0; i < 40; i++) {
      const began = performance.now();
      const answer = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const text = await answer.text();
      times.push(performance.now() - began);
      if (answer.status !== 200 || !text.includes('ratchet_operations')) throw new Error(`scrape failed: ${answer.status}`);
    }
    return times.slice(10);
  };
  const rows: string[] = [];
  // SQLite: the schema made by a first start, the operations inserted in one statement, then started again.
  const dataDir = join(work, 'scrape');
  await stopProcess(await start({ DATA_DIR: dataDir }));
  const db = Sqlite.open(join(dataDir, 'ratchet.db'));
  db.connection.exec(
    `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${n - 1})
     INSERT INTO operations (name, kind, state, version, recorded_at, record, poll_bucket, next_poll_at)
     SELECT 'batches/seed-' || i, ${kindCase('i')}, CASE WHEN i % 20 = 0 THEN 'RUNNING' ELSE 'SUCCEEDED' END, 1,
       '2026-12-01T00:00:00.000000000Z', json_object('name', 'batches/seed-' || i, 'createdAt', '2026-12-01T00:00:00.000000000Z'),
       'open', NULL FROM n`,
  );
  db.close();
  const sqlite = await start({ DATA_DIR: dataDir });
  const onSqlite = await time(sqlite.url);
  await stopProcess(sqlite);
  rows.push(`| SQLite | ${percentile(onSqlite, 0.5).toFixed(1)} | ${percentile(onSqlite, 0.95).toFixed(1)} |`);
  // PostgreSQL: a server of its own, the schema made by the first start, the operations inserted with generate_series.
  const server = await startPostgres();
  try {
    const schema = 'bench_scrape';
    const pg = await start({ DATABASE_URL: server.url, DATABASE_SCHEMA: schema, DATA_DIR: join(work, 'scrape-pg') });
    const { default: pgModule } = await import('pg');
    const client = new pgModule.Client({ connectionString: server.url });
    await client.connect();
    await client.query(
      `INSERT INTO ${schema}.operations (name, kind, state, version, recorded_at, created_at, record, change_key)
       SELECT 'batches/seed-' || i, ${kindCase('i')}, CASE WHEN i % 20 = 0 THEN 'RUNNING' ELSE 'SUCCEEDED' END, 1,
         '2026-12-01T00:00:00.000000000Z', '2026-12-01T00:00:00.000000000Z',
         json_build_object('name', 'batches/seed-' || i, 'createdAt', '2026-12-01T00:00:00.000000000Z')::text, pg_current_xact_id()
       FROM generate_series(0, ${n - 1}) AS i`,
    );
    // As autovacuum leaves a table after a load (its visibility map set: the counts read the index alone).
    await client.query(`VACUUM ANALYZE ${schema}.operations`);
    await client.end();
    const onPostgres = await time(pg.url);
    await stopProcess(pg);
    rows.push(`| PostgreSQL | ${percentile(onPostgres, 0.5).toFixed(1)} | ${percentile(onPostgres, 0.95).toFixed(1)} |`);
  } finally {
    await server.stop();
  }
  console.log(`\n\`GET /metrics\` with ${n.toLocaleString('en')} stored operations (5 % open), 30 scrapes after 10, one at a time:\n`);
  console.log('| engine | scrape p50 ms | p95 ms |');
  console.log('|---|---:|---:|');
  for (const row of rows) console.log(row);
}

const kindCase = (i: string) => `CASE ${i} % 4 ${KINDS.map((kind, k) => `WHEN ${k} THEN '${kind}'`).join(' ')} END`;
