/**
 * The PostgreSQL engine (`BENCH_SECTIONS=postgres`), side by side in one run
 * with the SQLite engine and the seed receiver on SQLite: deliveries a second
 * with the outbound sink on, one `ratchet start` on PostgreSQL and three
 * (the load generator sending to each in turn, as a round-robin front does),
 * and CPU per delivery: each system's processes and, on PostgreSQL, its own
 * backends only (a login role per system: the other system's idle polls and
 * the server's own processes count for nobody; bench/backends.ts). On two
 * shared cores the three-instance figure is a floor, not a scale-out result.
 * Then the effect lag at a fixed offered rate, and the watch lag across
 * instances: deliveries to one instance, a long-polling reader on another.
 * The server runs with its defaults (fsync on). Under the slow-flush shim
 * (`LD_PRELOAD`, ../shared/tools/slowsync.c) every process, the server
 * included, pays for each flush.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newSecret } from '../test/support/deliveries.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { Receiver } from '../test/support/receiver.ts';
import { RoleBackends } from './backends.ts';
import { mixes, percentile } from './mixes.ts';
import { type Started, settled, startGenerator, startProcess, stopProcess, treeCpuMs } from './processes.ts';

type System = 'sqlite' | 'pg1' | 'pg3' | 'seed';
const READY = /Ratchet ready at (http:\/\/\S+) /;
const TOKEN = 'bench-api-token-0123456789abcdef';

export async function benchPostgres(options: { root: string; size: number; rounds: number; lagRate: number; lagCount: number }) {
  const { root } = options;
  const secret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-postgres-'));
  const server = await startPostgres({ durable: true });
  const backends = await RoleBackends.watch(server);
  // One login role per PostgreSQL system: its backends, and only they, are its server-side CPU.
  const roleUrl = { pg1: await backends.role('bench_pg1', server.url), pg3: await backends.role('bench_pg3', server.url) };
  const generator = startGenerator(root);
  const env = (extra: Record<string, string>) => ({
    PORT: '0',
    WEBHOOK_SIGNING_SECRETS: secret,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    RATCHET_API_TOKEN: TOKEN,
    ...extra,
  });
  const start = (extra: Record<string, string>) =>
    startProcess([process.execPath, '--import', 'tsx', 'local/start.ts'], env(extra), READY, root);
  const started: Record<System, Started[]> = { sqlite: [], pg1: [], pg3: [], seed: [] };
  try {
    started.sqlite.push(await start({ DATA_DIR: join(work, 'sqlite') }));
    started.pg1.push(await start({ DATABASE_URL: roleUrl.pg1, DATABASE_SCHEMA: 'bench_one', DATA_DIR: join(work, 'pg1') }));
    started.pg3.push(await start({ DATABASE_URL: roleUrl.pg3, DATABASE_SCHEMA: 'bench_three', DATA_DIR: join(work, 'pg3') }));
    for (let i = 0; i < 2; i++)
      started.pg3.push(await start({ DATABASE_URL: roleUrl.pg3, DATABASE_SCHEMA: 'bench_three', DATA_DIR: join(work, 'pg3') }));
    started.seed.push(
      await startProcess(
        [process.execPath, '--import', 'tsx', 'bench/seed-server.ts', 'sqlite', join(work, 'seed.db')],
        { BENCH_SECRET: secret },
        /listening (\S+)/,
        root,
      ),
    );
    const systems = Object.keys(started) as System[];
    const urlOf = (system: System) => started[system].map((s) => (system === 'seed' ? s.url : `${s.url}/webhooks/gemini`)).join(',');
    const cpuOf = async (system: System) =>
      started[system].reduce((ms, s) => ms + treeCpuMs(s.child.pid as number), 0) +
      (system === 'pg1' || system === 'pg3' ? await backends.cpuMs(`bench_${system}`) : 0);
    const play = async (system: System, prefix: string, index: number) => {
      const before = await cpuOf(system);
      const played = await generator.play(urlOf(system), secret, prefix, options.size, index);
      for (const s of started[system]) await settled(s.child.pid as number);
      return {
        perSecond: played.perSecond,
        p99: played.p99,
        cpu: ((await cpuOf(system)) - before) / options.size,
        notRecorded: played.notRecorded,
      };
    };
    for (const system of systems) for (const i of [0, 1, 2]) await play(system, `warm-${system}`, i);
    const labels = mixes('labels', 10).map((m) => m.label);
    const samples = new Map<string, Array<Awaited<ReturnType<typeof play>>>>();
    for (let round = 0; round < options.rounds; round++)
      for (const [i, label] of labels.entries())
        for (const [k] of systems.entries()) {
          const system = systems[(k + round + i) % systems.length] as System;
          samples.set(`${label}|${system}`, [...(samples.get(`${label}|${system}`) ?? []), await play(system, `${system}-${round}`, i)]);
        }
    const of = (label: string, system: System, field: 'perSecond' | 'p99' | 'cpu') =>
      percentile(
        (samples.get(`${label}|${system}`) ?? []).map((s) => s[field]),
        0.5,
      );
    const lost = (system: System) =>
      [...samples].filter(([key]) => key.endsWith(`|${system}`)).reduce((n, [, s]) => n + s.reduce((m, x) => m + x.notRecorded, 0), 0);
    console.log('\n## PostgreSQL: one and three instances beside the SQLite engine and the seed on SQLite\n');
    console.log(
      `${options.size} deliveries per mix, ${options.rounds} interleaved rounds (medians), sink on, Node ${process.version}${process.env.LD_PRELOAD ? `, LD_PRELOAD=${process.env.LD_PRELOAD} SLOWSYNC_US=${process.env.SLOWSYNC_US ?? 1000}` : ''}\n`,
    );
    console.log(
      '| mix | SQLite /s | PostgreSQL, 1 instance /s | 3 instances /s | seed /s | 1 instance ×SQLite | ×seed | CPU ms per delivery: SQLite / PG 1 / PG 3 / seed (PG: its own backends counted) | p99 ms: PG 1 / PG 3 |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const label of labels) {
      const rate = (system: System) => of(label, system, 'perSecond').toFixed(0);
      console.log(
        `| ${label} | ${rate('sqlite')} | ${rate('pg1')} | ${rate('pg3')} | ${rate('seed')} | ${(of(label, 'pg1', 'perSecond') / of(label, 'sqlite', 'perSecond')).toFixed(2)} | ${(of(label, 'pg1', 'perSecond') / of(label, 'seed', 'perSecond')).toFixed(2)} | ${(['sqlite', 'pg1', 'pg3', 'seed'] as const).map((s) => of(label, s, 'cpu').toFixed(2)).join(' / ')} | ${of(label, 'pg1', 'p99').toFixed(1)} / ${of(label, 'pg3', 'p99').toFixed(1)} |`,
      );
    }
    console.log(`\nAnswered 503 (not recorded; the sender retries): SQLite ${lost('sqlite')}, PG 1 ${lost('pg1')}, PG 3 ${lost('pg3')}`);

    // Effect lag: fresh state changes at a fixed rate; from the 200 to the receiver's first acceptance.
    console.log(
      `\nEffect lag at ${options.lagRate}/s offered (${options.lagCount} fresh state changes), and the watch lag across instances:\n`,
    );
    console.log('| system | achieved /s | effect lag p50 / p95 ms | not delivered | watch lag p50 / p95 ms (reader on another instance) |');
    console.log('|---|---:|---:|---:|---:|');
    for (const system of ['sqlite', 'pg1', 'pg3'] as const) {
      const prefix = `lag-${system}`;
      // A long-polling reader on the last instance while the deliveries go to the first.
      const reader = started[system].at(-1) as Started;
      const seen = new Map<string, number>();
      const stop = new AbortController();
      let cursor = (
        (await (await fetch(`${reader.url}/changes`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { cursor: string }
      ).cursor;
      const watching = (async () => {
        while (!stop.signal.aborted) {
          const page = (await (
            await fetch(`${reader.url}/changes?after=${cursor}&wait=5&limit=1000`, {
              headers: { authorization: `Bearer ${TOKEN}` },
              signal: stop.signal,
            })
          ).json()) as { changes: Array<{ name: string }>; cursor: string };
          const now = Date.now();
          for (const change of page.changes) if (!seen.has(change.name)) seen.set(change.name, now);
          cursor = page.cursor;
        }
      })().catch(() => undefined);
      const first = started[system][0] as Started;
      const offered = await generator.offer(`${first.url}/webhooks/gemini`, secret, prefix, options.lagRate, options.lagCount);
      const acknowledged = Object.entries(offered.acknowledged);
      const deadline = Date.now() + 60_000;
      while (acknowledged.some(([name]) => !receiver.firstAcceptedAt.has(`${name}#1`) || !seen.has(name)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      stop.abort();
      await watching;
      const effectLags = acknowledged.map(([name, at]) => (receiver.firstAcceptedAt.get(`${name}#1`) ?? Number.NaN) - at);
      const watchLags = acknowledged.map(([name, at]) => (seen.get(name) ?? Number.NaN) - at);
      console.log(
        `| ${system === 'sqlite' ? 'SQLite (reader on the same process)' : system === 'pg1' ? 'PostgreSQL, 1 instance' : 'PostgreSQL, 3 instances'} | ${offered.achievedRate.toFixed(0)} | ${percentile(effectLags, 0.5).toFixed(0)} / ${percentile(effectLags, 0.95).toFixed(0)} | ${effectLags.filter(Number.isNaN).length} | ${percentile(watchLags, 0.5).toFixed(0)} / ${percentile(watchLags, 0.95).toFixed(0)} |`,
      );
    }
  } finally {
    for (const list of Object.values(started)) for (const s of list) await stopProcess(s);
    generator.stop();
    await receiver.stop();
    await backends.stop();
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  }
}
