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
 * Then the effect lag at a fixed offered load, and the time to the ready line.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sqlite } from '../local/engine/sqlite.ts';
import { envelope, newSecret, signedDelivery } from '../test/support/deliveries.ts';
import { Receiver } from '../test/support/receiver.ts';
import { run } from './cold-start.ts';
import { type Mix, mixes, percentile, playMix } from './mixes.ts';
import { type Started, startProcess, stopProcess } from './processes.ts';

type System = 'ratchet' | 'ingest' | 'seed' | 'floor' | 'ref';
interface Sample {
  perSecond: number;
  p50: number;
  p99: number;
  lost: number;
  wrongFinal: number;
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
}

export async function benchEmbedded(options: EmbeddedOptions): Promise<void> {
  const { root } = options;
  const secret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  // The reads that check final states need the API token (a comparison ref older than the token ignores it).
  const BENCH_API_TOKEN = 'bench-api-token-0123456789abcdef';
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-embedded-'));
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

    const play = async (system: System, mix: Mix): Promise<Sample> => {
      const lostBefore = system === 'seed' ? await seedLost() : 0;
      const played = await playMix(webhookUrl(system), secret, mix);
      return {
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
      for (const system of systems) for (const mix of mixes(`warm-${pass}-${system}`, options.size)) await play(system, mix);
    const samples = new Map<string, Sample[]>();
    const labels = mixes('labels', 10).map((m) => m.label);
    for (let round = 0; round < options.rounds; round++) {
      for (const [i, label] of labels.entries()) {
        // Each mix back to back on every system, the order rotating.
        const order = systems.map((_, k) => systems[(k + round + i) % systems.length] as System);
        for (const system of order) {
          const mix = mixes(`${system}-${round}`, options.size).find((m) => m.label === label) as Mix;
          const key = `${label}|${system}`;
          samples.set(key, [...(samples.get(key) ?? []), await play(system, mix)]);
        }
      }
    }
    const of = (label: string, system: System, field: keyof Sample) =>
      median((samples.get(`${label}|${system}`) ?? []).map((s) => s[field]));
    const sum = (label: string, system: System, field: keyof Sample) =>
      (samples.get(`${label}|${system}`) ?? []).reduce((n, s) => n + s[field], 0);
    const ratio = (label: string, field: keyof Sample, to: System, from: System = 'ratchet') =>
      (of(label, from, field) / of(label, to, field)).toFixed(2);

    console.log('\n## The embedded engine: Ratchet on SQLite beside the seed on SQLite, the floor and the runtime before\n');
    console.log(
      `${options.size} deliveries per mix, ${options.rounds} interleaved rounds (medians), signed webhooks over HTTP to a process per system, Node ${process.version}; Ratchet with its outbound sink on\n`,
    );
    const refColumns = started.ref ? ' ×before (DynamoDB Local) |' : '';
    console.log(
      `| mix | Ratchet deliveries/s | ×seed on SQLite | ×floor |${refColumns} without a sink: ×seed | ×floor | p50 / p99 ms (Ratchet) | lost: seed / Ratchet 503 | wrong final: seed / Ratchet |`,
    );
    console.log(`|---|---:|---:|---:|${started.ref ? '---:|' : ''}---:|---:|---:|---:|---:|`);
    for (const label of labels) {
      const refCell = started.ref ? ` ${ratio(label, 'perSecond', 'ref')} |` : '';
      console.log(
        `| ${label} | ${of(label, 'ratchet', 'perSecond').toFixed(0)} | ${ratio(label, 'perSecond', 'seed')} | ${ratio(label, 'perSecond', 'floor')} |${refCell} ${ratio(label, 'perSecond', 'seed', 'ingest')} | ${ratio(label, 'perSecond', 'floor', 'ingest')} | ${of(label, 'ratchet', 'p50').toFixed(1)} / ${of(label, 'ratchet', 'p99').toFixed(1)} | ${sum(label, 'seed', 'lost')} / ${sum(label, 'ratchet', 'lost') + sum(label, 'ingest', 'lost')} | ${sum(label, 'seed', 'wrongFinal')} / ${sum(label, 'ratchet', 'wrongFinal') + sum(label, 'ingest', 'wrongFinal')} |`,
      );
    }

    // Effect lag: fresh state changes offered at a fixed rate; from the 200 to the receiver's first acceptance.
    const lag = async (system: 'ratchet' | 'ref') => {
      const acknowledged = new Map<string, number>();
      const sends: Promise<void>[] = [];
      let refused = 0;
      const t0 = performance.now();
      for (let i = 0; i < options.lagCount; i++) {
        const wait = t0 + (i * 1000) / options.lagRate - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        const name = `batches/lag-${system}-${i}`;
        const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: name }));
        sends.push(
          fetch(webhookUrl(system), { method: 'POST', body, headers }).then(async (response) => {
            await response.arrayBuffer();
            if (response.status === 200) acknowledged.set(`${name}#1`, Date.now());
            else refused++;
          }),
        );
      }
      await Promise.all(sends);
      const offeredSeconds = (performance.now() - t0) / 1000;
      const deadline = Date.now() + 60_000;
      while ([...acknowledged.keys()].some((id) => !receiver.firstAcceptedAt.has(id)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      const lags = [...acknowledged].map(([id, at]) => (receiver.firstAcceptedAt.get(id) ?? Number.NaN) - at);
      return {
        achieved: options.lagCount / offeredSeconds,
        p50: percentile(lags, 0.5),
        p95: percentile(lags, 0.95),
        missing: lags.filter(Number.isNaN).length,
        refused,
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
    for (const one of Object.values(started)) if (one) await stopProcess(one);
    await receiver.stop();
    if (refTree) {
      await run('git', ['-C', root, 'worktree', 'remove', '--force', refTree]).catch(() => undefined);
      rmSync(refTree, { recursive: true, force: true });
    }
    rmSync(work, { recursive: true, force: true });
  }
}
