/**
 * Ratchet inside an application (`BENCH_SECTIONS=library`; local/library.ts):
 * 1. Cold start: a new Node process that imports the built `@ratchet/server`
 *    (dist/packages/server), calls `createRatchet` and answers its first
 *    request, a signed webhook; beside a process that answers with a
 *    hello-world fetch handler, in the same run. On SQLite in memory, and on
 *    PostgreSQL (a schema already migrated: each cold process checks it).
 * 2. The webhook's answer time in library mode on PostgreSQL, `ratchet.fetch`
 *    called in process (no HTTP), with effects due: queued and not delivered
 *    (a cron's app between ticks), and delivered meanwhile by `start()` to an
 *    `onChange` that writes in its transaction.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildPackages } from '../packages/build.ts';
import { envelope, newSecret, signedDelivery } from '../test/support/deliveries.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { percentile } from './mixes.ts';

const run = promisify(execFile);

/** The child: its own clock from process start to the first answer (performance.now() counts from the process's start). */
const HELLO = `
const handler = async (request) => new Response('hello ' + new URL(request.url).pathname);
const answer = await handler(new Request('http://127.0.0.1/webhooks/gemini', { method: 'POST', body: '{}' }));
await answer.text();
console.log(JSON.stringify({ status: answer.status, ms: performance.now() }));
`;
const LIBRARY = (entry: string) => `
const { createRatchet } = await import(${JSON.stringify(entry)});
const ratchet = createRatchet({ env: { ...process.env } });
const delivery = JSON.parse(process.env.BENCH_DELIVERY);
const answer = await ratchet.fetch(new Request('http://127.0.0.1/webhooks/gemini', { method: 'POST', headers: delivery.headers, body: delivery.body }));
await answer.text();
const ms = performance.now();
console.log(JSON.stringify({ status: answer.status, ms }));
await ratchet.close();
`;

export async function benchLibrary(options: { root: string; runs: number; count: number }) {
  const { root } = options;
  const staged = await buildPackages(['server']);
  const entry = join(staged.server as string, 'dist/index.js');
  const secret = newSecret();
  const server = await startPostgres({ durable: true });
  try {
    const baseEnv = {
      PATH: process.env.PATH as string,
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      WEBHOOK_SIGNING_SECRETS: secret,
      RATCHET_API_TOKEN: 'bench-library-token-0123456789abcdef',
    };
    const kinds = {
      hello: { script: HELLO, env: {} as Record<string, string> },
      sqlite: { script: LIBRARY(entry), env: { DATA_DIR: ':memory:' } as Record<string, string> },
      postgres: { script: LIBRARY(entry), env: { DATABASE_URL: server.url, DATABASE_SCHEMA: 'bench_library' } as Record<string, string> },
    };
    // The schema migrated once before (as a deployed app finds it).
    await once(kinds.postgres, 'warm');
    async function once(kind: { script: string; env: Record<string, string> }, id: string) {
      const delivery = signedDelivery(secret, envelope('batch.succeeded', { id: `batches/cold-${id}` }));
      const started = performance.now();
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', kind.script], {
        cwd: root,
        env: { ...baseEnv, ...kind.env, BENCH_DELIVERY: JSON.stringify(delivery) },
      });
      const line = JSON.parse(stdout.trim().split('\n').at(-1) as string) as { status: number; ms: number };
      if (line.status !== 200) throw new Error(`cold start ${id}: answered ${line.status}`);
      return { first: line.ms, wall: performance.now() - started };
    }
    const samples: Record<keyof typeof kinds, Array<{ first: number; wall: number }>> = { hello: [], sqlite: [], postgres: [] };
    for (let i = 0; i < options.runs; i++)
      for (const name of Object.keys(kinds) as Array<keyof typeof kinds>) samples[name].push(await once(kinds[name], `${name}-${i}`));
    console.log('\n## Inside your app: cold start and the webhook in library mode\n');
    console.log(
      `${options.runs} new processes each (medians), Node ${process.version}: from the process's start to its first answer (a signed webhook), and the whole process (with its exit)\n`,
    );
    console.log('| process | first answer ms | whole process ms | first answer − hello world ms |');
    console.log('|---|---:|---:|---:|');
    const median = (name: keyof typeof kinds, field: 'first' | 'wall') =>
      percentile(
        samples[name].map((s) => s[field]),
        0.5,
      );
    const label = { hello: 'hello-world fetch handler', sqlite: 'createRatchet, SQLite in memory', postgres: 'createRatchet, PostgreSQL' };
    for (const name of Object.keys(kinds) as Array<keyof typeof kinds>)
      console.log(
        `| ${label[name]} | ${median(name, 'first').toFixed(0)} | ${median(name, 'wall').toFixed(0)} | ${(median(name, 'first') - median('hello', 'first')).toFixed(0)} |`,
      );

    // The webhook's answer time, in process, with effects due.
    const { createRatchet } = (await import(entry)) as typeof import('../local/library.ts');
    const pg = (await import('pg')).default;
    const pool = new pg.Pool({ connectionString: server.url, max: 12 });
    await pool.query('CREATE TABLE IF NOT EXISTS bench_library_changes (id text NOT NULL)');
    console.log(`\n${options.count} webhooks each, 8 at a time, through ratchet.fetch on PostgreSQL (one new state change each):\n`);
    console.log('| effects | answer p50 ms | p95 ms | p99 ms | webhooks/s |');
    console.log('|---|---:|---:|---:|---:|');
    for (const mode of ['queued, not delivered (between ticks)', 'delivered meanwhile by start() to onChange'] as const) {
      const ratchet = createRatchet({
        pool,
        schema: mode.startsWith('queued') ? 'bench_library_queued' : 'bench_library_started',
        webhookSigningSecrets: secret,
        onChange: async (change, { sql }) => {
          await sql?.('INSERT INTO bench_library_changes (id) VALUES ($1)', [change.id]);
        },
        env: { POWERTOOLS_LOG_LEVEL: 'SILENT' },
      });
      await ratchet.ready();
      if (!mode.startsWith('queued')) await ratchet.start();
      const latencies: number[] = [];
      const deliveries = Array.from({ length: options.count }, (_, i) =>
        signedDelivery(secret, envelope('batch.succeeded', { id: `batches/lib-${mode.length}-${i}` })),
      );
      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          for (let i = next++; i < deliveries.length; i = next++) {
            const { body, headers } = deliveries[i] as (typeof deliveries)[number];
            const sent = performance.now();
            const answer = await ratchet.fetch(new Request('http://127.0.0.1/webhooks/gemini', { method: 'POST', headers, body }));
            await answer.text();
            if (answer.status !== 200) throw new Error(`webhook answered ${answer.status}`);
            latencies.push(performance.now() - sent);
          }
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      console.log(
        `| ${mode} | ${percentile(latencies, 0.5).toFixed(1)} | ${percentile(latencies, 0.95).toFixed(1)} | ${percentile(latencies, 0.99).toFixed(1)} | ${(options.count / seconds).toFixed(0)} |`,
      );
      await ratchet.close();
    }
    await pool.end();
  } finally {
    await server.stop();
  }
}
