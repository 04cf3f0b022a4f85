/**
 * The embedded engine measured side by side, each system a process of its
 * own receiving the same signed deliveries over HTTP from this one:
 * - Ratchet (`local/start.ts` on SQLite) with its outbound sink on: the write,
 *   the outbox, history, and one signed outbound POST per state change;
 * - the same without a sink (`ingest`): the write, the outbox and history;
 * - the seed receiver on SQLite (the seed's SQL and retry loop, same binding
 *   and settings);
 * - the floor: a receiver that verifies the signature and answers 200;
 * - with BENCH_COMPARE_REF, the runtime at that ref (before this engine: on
 *   DynamoDB Local).
 * The deliveries come from a load generator in a process of its own
 * (load-generator.ts). Then the effect lag at a fixed offered load, overload at
 * 2x and 4x Ratchet's capacity (answers, 503s, resets, what was acknowledged,
 * recovery), RSS after many deliveries, and the time to the ready line.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sqlite } from '../engines/sqlite/sqlite.ts';
import { newSecret } from '../test/support/deliveries.ts';
import { Receiver } from '../test/support/receiver.ts';
import { run } from './cold-start.ts';
import { type Mix, mixes, percentile } from './mixes.ts';
import { childrenOf, cpuMs, rssMb, type Started, settled, startGenerator, startProcess, stopProcess, treeCpuMs } from './processes.ts';

type System = 'ratchet' | 'ingest' | 'seed' | 'floor' | 'ref';
interface Sample {
  perSecond: number;
  p50: number;
  p99: number;
  lost: number;
  wrongFinal: number;
  /** CPU ms per delivery of the system's processes (Ratchet: the runtime and its derived-work process), left work included. */
  cpu: number;
  /** The same, of the webhook process alone (the one that answers). */
  cpuIngest: number;
}
const median = (xs: number[]) => percentile(xs, 0.5);

export interface EmbeddedOptions {
  root: string;
  size: number;
  rounds: number;
  compareRef?: string;
  /** Offered load and length of the effect-lag run. */
  lagRate: number;
  lagCount: number;
  /** Deliveries before the second RSS reading (the first is after a tenth of them). */
  rssCount: number;
  /** Seconds each overload run offers its load. */
  overloadSeconds: number;
}

export async function benchEmbedded(options: EmbeddedOptions): Promise<void> {
  const { root } = options;
  const secret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  // The reads that check final states need the API token (a comparison ref older than the token ignores it).
  const BENCH_API_TOKEN = 'bench-api-token-0123456789abcdef';
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-embedded-'));
  const generator = startGenerator(root);
  const runtimeEnv = (dir: string) => ({
    DATA_DIR: join(work, dir),
    PORT: '0',
    WEBHOOK_SIGNING_SECRETS: secret,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    RATCHET_API_TOKEN: BENCH_API_TOKEN,
  });
  const READY = /Ratchet ready at (http:\/\/\S+) /;
  const started: Partial<Record<System, Started>> = {};
  let refTree: string | undefined;
  try {
    started.ratchet = await startProcess([process.execPath, '--import', 'tsx', 'local/start.ts'], runtimeEnv('ratchet'), READY, root);
    const { EFFECTS_WEBHOOK_URL: _url, EFFECTS_SIGNING_SECRET: _secret, ...withoutSink } = runtimeEnv('ingest');
    started.ingest = await startProcess([process.execPath, '--import', 'tsx', 'local/start.ts'], withoutSink, READY, root);
    const seedFile = join(work, 'seed.db');
    const seedServer = [process.execPath, '--import', 'tsx', 'bench/seed-server.ts'];
    started.seed = await startProcess([...seedServer, 'sqlite', seedFile], { BENCH_SECRET: secret }, /listening (\S+)/, root);
    started.floor = await startProcess([...seedServer, 'floor'], { BENCH_SECRET: secret }, /listening (\S+)/, root);
    if (options.compareRef) {
      refTree = mkdtempSync(join(tmpdir(), 'ratchet-bench-ref-runtime-'));
      await run('git', ['-C', root, 'worktree', 'add', '--detach', refTree, options.compareRef]);
      symlinkSync(join(root, 'node_modules'), join(refTree, 'node_modules'));
      mkdirSync(join(work, 'ref'));
      started.ref = await startProcess([process.execPath, '--import', 'tsx', 'local/start.ts'], runtimeEnv('ref'), READY, refTree);
    }
    const systems = (Object.keys(started) as System[]).filter((s) => started[s]);
    const webhookUrl = (system: System) => {
      const url = (started[system] as Started).url;
      return system === 'seed' || system === 'floor' ? url : `${url}/webhooks/gemini`;
    };
    const seedLost = async () => ((await (await fetch(new URL('/lost', started.seed?.url))).json()) as { lost: number }).lost;

    const play = async (system: System, prefix: string, index: number): Promise<Sample> => {
      const mix = mixes(prefix, options.size)[index] as Mix;
      const lostBefore = system === 'seed' ? await seedLost() : 0;
      const pid = (started[system] as Started).child.pid as number;
      const [cpuBefore, ingestBefore] = [treeCpuMs(pid), cpuMs(pid)];
      const played = await generator.play(webhookUrl(system), secret, prefix, options.size, index);
      await settled(pid);
      return {
        cpu: (treeCpuMs(pid) - cpuBefore) / options.size,
        cpuIngest: (cpuMs(pid) - ingestBefore) / options.size,
        perSecond: played.perSecond,
        p50: played.p50,
        p99: played.p99,
        lost: system === 'seed' ? (await seedLost()) - lostBefore : played.notRecorded,
        wrongFinal: system === 'floor' ? 0 : await wrongFinalStates(system, mix),
      };
    };

    /** Operations whose stored state or time is not the maximum sent (read outside the timed part). */
    const wrongFinalStates = async (system: System, mix: Mix): Promise<number> => {
      const last = new Map<string, { state: string; time: string }>();
      for (const delivery of mix.deliveries) {
        const { type, data } = JSON.parse(delivery.body) as { type: string; data: { id: string; update_time?: string } };
        const state = type.endsWith('succeeded') || type.endsWith('completed') ? 'SUCCEEDED' : 'REQUIRES_ACTION';
        const known = last.get(data.id);
        if (!known || (known.state !== 'SUCCEEDED' && (state === 'SUCCEEDED' || (data.update_time ?? '') > known.time)))
          last.set(data.id, { state, time: data.update_time ?? '' });
      }
      let wrong = 0;
      const seedDb = system === 'seed' ? Sqlite.open(seedFile, { readonly: true }) : undefined;
      for (const [name, expected] of last) {
        const stored =
          seedDb?.get<{ state: string }>('SELECT state FROM seed WHERE name = ?', name) ??
          (system === 'seed'
            ? undefined
            : ((await (
                await fetch(`${(started[system] as Started).url}/operations/${name}`, {
                  headers: { authorization: `Bearer ${BENCH_API_TOKEN}` },
                })
              ).json()) as { state?: string }));
        if (stored?.state !== expected.state) wrong++;
      }
      seedDb?.close();
      return wrong;
    };

    // Warm-up: JIT, page cache, DynamoDB Local's JVM for the ref.
    for (let pass = 0; pass < 2; pass++)
      for (const system of systems) for (const i of [0, 1, 2]) await play(system, `warm-${pass}-${system}`, i);
    const samples = new Map<string, Sample[]>();
    const labels = mixes('labels', 10).map((m) => m.label);
    for (let round = 0; round < options.rounds; round++) {
      for (const [i, label] of labels.entries()) {
        // Each mix back to back on every system, the order rotating.
        const order = systems.map((_, k) => systems[(k + round + i) % systems.length] as System);
        for (const system of order) {
          const key = `${label}|${system}`;
          samples.set(key, [...(samples.get(key) ?? []), await play(system, `${system}-${round}`, i)]);
        }
      }
    }
    const of = (label: string, system: System, field: keyof Sample) =>
      median((samples.get(`${label}|${system}`) ?? []).map((s) => s[field]));
    const sum = (label: string, system: System, field: keyof Sample) =>
      (samples.get(`${label}|${system}`) ?? []).reduce((n, s) => n + s[field], 0);
    const ratio = (label: string, field: keyof Sample, to: System, from: System = 'ratchet') =>
      (of(label, from, field) / of(label, to, field)).toFixed(2);

    const cpuCell = (label: string, system: System) => {
      const ingest = of(label, system, 'cpuIngest');
      return `${ingest.toFixed(2)} + ${(of(label, system, 'cpu') - ingest).toFixed(2)}`;
    };
    console.log('\n## The embedded engine: Ratchet on SQLite beside the seed on SQLite, the floor and the runtime before\n');
    console.log(
      `${options.size} deliveries per mix, ${options.rounds} interleaved rounds (medians), signed webhooks over HTTP to a process per system, Node ${process.version}; Ratchet with its outbound sink on\n`,
    );
    const refColumns = started.ref ? ` ×before (${options.compareRef}) |` : '';
    console.log(
      `| mix | Ratchet deliveries/s | ×seed on SQLite | ×floor |${refColumns} without a sink: ×seed | ×floor | p50 / p99 ms (Ratchet) | CPU ms per delivery (the webhook process + the rest): Ratchet / without a sink / seed | lost: seed / Ratchet 503 | wrong final: seed / Ratchet |`,
    );
    console.log(`|---|---:|---:|---:|${started.ref ? '---:|' : ''}---:|---:|---:|---:|---:|---:|`);
    for (const label of labels) {
      const refCell = started.ref ? ` ${ratio(label, 'perSecond', 'ref')} |` : '';
      console.log(
        `| ${label} | ${of(label, 'ratchet', 'perSecond').toFixed(0)} | ${ratio(label, 'perSecond', 'seed')} | ${ratio(label, 'perSecond', 'floor')} |${refCell} ${ratio(label, 'perSecond', 'seed', 'ingest')} | ${ratio(label, 'perSecond', 'floor', 'ingest')} | ${of(label, 'ratchet', 'p50').toFixed(1)} / ${of(label, 'ratchet', 'p99').toFixed(1)} | ${cpuCell(label, 'ratchet')} / ${cpuCell(label, 'ingest')} / ${cpuCell(label, 'seed')} | ${sum(label, 'seed', 'lost')} / ${sum(label, 'ratchet', 'lost') + sum(label, 'ingest', 'lost')} | ${sum(label, 'seed', 'wrongFinal')} / ${sum(label, 'ratchet', 'wrongFinal') + sum(label, 'ingest', 'wrongFinal')} |`,
      );
    }

    // Effect lag: fresh state changes offered at a fixed rate; from the 200 to the receiver's first acceptance.
    const lag = async (system: 'ratchet' | 'ref') => {
      const offered = await generator.offer(webhookUrl(system), secret, `lag-${system}`, options.lagRate, options.lagCount);
      const deadline = Date.now() + 60_000;
      const acknowledged = Object.entries(offered.acknowledged);
      while (acknowledged.some(([name]) => !receiver.firstAcceptedAt.has(`${name}#1`)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      const lags = acknowledged.map(([name, at]) => (receiver.firstAcceptedAt.get(`${name}#1`) ?? Number.NaN) - at);
      return {
        achieved: offered.achievedRate,
        p50: percentile(lags, 0.5),
        p95: percentile(lags, 0.95),
        missing: lags.filter(Number.isNaN).length,
        refused: offered.unavailable + offered.other + offered.reset,
      };
    };
    console.log(
      `\nEffect lag at ${options.lagRate} deliveries/s offered (${options.lagCount} fresh state changes; from the 200 to the receiver's first acceptance):\n`,
    );
    console.log('| runtime | achieved deliveries/s | lag p50 ms | lag p95 ms | not delivered | 503 |');
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const system of started.ref ? (['ratchet', 'ref'] as const) : (['ratchet'] as const)) {
      const l = await lag(system);
      console.log(
        `| ${system === 'ratchet' ? 'embedded engine' : `before (${options.compareRef})`} | ${l.achieved.toFixed(0)} | ${l.p50.toFixed(1)} | ${l.p95.toFixed(1)} | ${l.missing} | ${l.refused} |`,
      );
    }

    // Overload: capacity is what Ratchet answers to fresh state changes offered faster than it can take them
    // (open loop, 1,024 connections); then 2x and 4x that.
    const ratchetUrl = webhookUrl('ratchet');
    const burst = await generator.offer(ratchetUrl, secret, 'capacity', 20_000, 10_000);
    const capacity = burst.okRate;
    console.log(
      `\nOverload (sink on): capacity ${capacity.toFixed(0)}/s (200s per second to 10,000 fresh state changes sent at once; ${burst.unavailable} answered 503, p99 ${burst.p99.toFixed(0)} ms); fresh state changes offered at 2x and 4x that for ${options.overloadSeconds} s, then 0.5x (recovery: the first second answering at least 90 % of it):\n`,
    );
    console.log(
      '| offered | sent/s | answered/s (200/s) | p50 / p99 ms | 200 | 503 | other | reset | acknowledged, not stored | effects missing / twice | recovered within |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const factor of [2, 4]) {
      const rate = capacity * factor;
      const offered = await generator.offer(ratchetUrl, secret, `over-${factor}`, rate, Math.round(rate * options.overloadSeconds));
      const after = await generator.offer(ratchetUrl, secret, `after-${factor}`, capacity / 2, Math.round(capacity * 5));
      const target = (capacity / 2) * 0.9;
      const recovered = after.answeredPerSecond.findIndex((n) => n >= target);
      const names = Object.keys(offered.acknowledged);
      let notStored = 0;
      for (const name of names) {
        const record = (await (
          await fetch(`${(started.ratchet as Started).url}/operations/${name}`, { headers: { authorization: `Bearer ${BENCH_API_TOKEN}` } })
        ).json()) as { state?: string };
        if (record.state !== 'SUCCEEDED') notStored++;
      }
      const deadline = Date.now() + 60_000;
      while (names.some((name) => !receiver.firstAcceptedAt.has(`${name}#1`)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 100));
      const missing = names.filter((name) => !receiver.firstAcceptedAt.has(`${name}#1`)).length;
      const ids = new Set(names.map((name) => `${name}#1`));
      const twice = receiver.accepted.filter((d) => ids.has(d.id)).length - (names.length - missing);
      console.log(
        `| ${factor}x (${rate.toFixed(0)}/s) | ${offered.achievedRate.toFixed(0)} | ${offered.answeredRate.toFixed(0)} (${offered.okRate.toFixed(0)}) | ${offered.p50.toFixed(0)} / ${offered.p99.toFixed(0)} | ${offered.ok} | ${offered.unavailable} | ${offered.other} | ${offered.reset} | ${notStored} | ${missing} / ${twice} | ${recovered < 0 ? 'not within 10 s' : `${recovered + 1} s`} |`,
      );
    }

    // Memory: RSS of the runtime and of its derived-work process after a tenth of the deliveries, then after all.
    const main = (started.ratchet as Started).child.pid as number;
    const rss = () => {
      const derived = childrenOf(main)[0];
      return { main: rssMb(main), derived: derived ? rssMb(derived) : Number.NaN };
    };
    let sent = 0;
    let round = 0;
    let first: ReturnType<typeof rss> | undefined;
    while (sent < options.rssCount) {
      await generator.play(ratchetUrl, secret, `rss-${round++}`, options.size, 1);
      sent += options.size;
      if (!first && sent >= options.rssCount / 10) first = rss();
    }
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const last = rss();
    const f = first as ReturnType<typeof rss>;
    console.log(
      `\nRSS (storm mix, sink on): after ${(options.rssCount / 10).toLocaleString('en')} deliveries ${f.main.toFixed(0)} MB (runtime) + ${f.derived.toFixed(0)} MB (derived work); after ${options.rssCount.toLocaleString('en')}: ${last.main.toFixed(0)} MB + ${last.derived.toFixed(0)} MB (x${(last.main / f.main).toFixed(2)}, x${(last.derived / f.derived).toFixed(2)})`,
    );

    // Ready time: a fresh data folder each time.
    for (const system of systems) if (system !== 'ratchet' && system !== 'ref') await stopProcess(started[system] as Started);
    const readiness = async (command: string[], cwd: string, label: string) => {
      const times: number[] = [];
      for (let i = 0; i < 3; i++) {
        const once = await startProcess(command, { ...runtimeEnv(`ready-${label}-${i}`) }, READY, cwd);
        times.push(once.readyMs);
        await stopProcess(once);
      }
      return median(times);
    };
    await stopProcess(started.ratchet as Started);
    if (started.ref) await stopProcess(started.ref);
    const direct = await readiness([process.execPath, '--import', 'tsx', 'local/start.ts'], root, 'direct');
    const viaNpm = await readiness(['npm', 'start'], root, 'npm');
    const refReady = refTree ? await readiness([process.execPath, '--import', 'tsx', 'local/start.ts'], refTree, 'ref') : undefined;
    console.log(
      `\nReady line (median of 3, a new data folder each): \`npm start\` ${viaNpm.toFixed(0)} ms; \`node --import tsx local/start.ts\` ${direct.toFixed(0)} ms${refReady ? `, before ${refReady.toFixed(0)} ms (×${(direct / refReady).toFixed(2)})` : ''}`,
    );
  } finally {
    generator.stop();
    for (const one of Object.values(started)) if (one) await stopProcess(one);
    await receiver.stop();
    if (refTree) {
      await run('git', ['-C', root, 'worktree', 'remove', '--force', refTree]).catch(() => undefined);
      rmSync(refTree, { recursive: true, force: true });
    }
    rmSync(work, { recursive: true, force: true });
  }
}
