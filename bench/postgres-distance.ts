/**
 * PostgreSQL at network distance (`BENCH_SECTIONS=postgres-distance`): one
 * Ratchet instance (effects on, to a receiver) beside the seed's recipe on
 * the same PostgreSQL server (read, then update on the version read: two
 * autocommitted statements per delivery, bench/seed-baseline.ts), and beside
 * the same Ratchet without effects (what the effects cost), each on this
 * machine's server directly; the seed and Ratchet also through a proxy that
 * holds every chunk 1 ms each way (bench/pg-proxy-process.ts: the database a
 * zone away), each through a proxy process of its own so that neither's load
 * slows the other's network.
 *
 * The proxy is a Node process on the same two cores, and what it adds beyond
 * its 1 ms grows with what it carries (the seed sends several times Ratchet's
 * statements): during every play through a proxy, a probe in a process of its
 * own (bench/pg-probe-process.ts) times `SELECT 1` in turn directly, through
 * that proxy's undelayed listener and through the delayed one the load takes,
 * and that added latency is printed beside every "away" figure.
 *
 * The same three mixes, 32 senders at a time, interleaved rounds (medians):
 * deliveries a second, p50 answer time, CPU per delivery (each system's
 * process, and its own PostgreSQL backends only: each system connects under a
 * role of its own, bench/backends.ts), shared buffers per delivery
 * (pg_stat_statements, by role), and, at each proxy, the statements its
 * system sent per delivery, Ratchet's split into the webhook's, the effects'
 * (claims, settles, renewals) and the rest (NOTIFY, the feed's and the
 * queue's polls). Then one instance's effect lag at BENCH_PG_LAG_RATE fresh
 * state changes a second, here and away, with the buffers its effects' claims
 * touched per effect.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newSecret } from '../test/support/deliveries.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { Receiver } from '../test/support/receiver.ts';
import { RoleBackends } from './backends.ts';
import { mixes, percentile } from './mixes.ts';
import { PROBE } from './pg-probe-process.ts';
import { type Started, settled, startGenerator, startProcess, stopProcess, treeCpuMs } from './processes.ts';

const READY = /Ratchet ready at (http:\/\/\S+) /;
const TOKEN = 'bench-api-token-0123456789abcdef';
const SENDERS = 32;
const DELAY_MS = 1;

type Place = 'here' | 'away';
/** `quiet`: Ratchet without effects (no outbound sink). */
type Recipe = 'seed' | 'ratchet' | 'quiet';
const SYSTEMS = [
  ['seed', 'here'],
  ['ratchet', 'here'],
  ['quiet', 'here'],
  ['seed', 'away'],
  ['ratchet', 'away'],
] as const;
/** A system's name, and its PostgreSQL role's. */
const keyOf = (recipe: Recipe, place: Place) => `${recipe}_${place}`;

/** What kind of work a statement the proxy saw was. */
function classOf(statement: string): 'webhook' | 'effects' | 'other' {
  if (/held AS|seen AS|seed_|_write$|_note$/.test(statement)) return 'webhook';
  if (/ready AS \(|WITH settled AS|SET claimed_until = |_claim$|_settle$|_renew$/.test(statement)) return 'effects';
  return 'other';
}
/** pg_stat_statements' text of the effects' claim (engines/postgres/effects-queue.ts), idle polls that found none included. */
const CLAIM = '%ready AS (%FOR UPDATE OF e SKIP LOCKED%';

/** One system's proxy process: its delayed and undelayed ports, and the statements it saw. */
interface Proxy {
  port: number;
  undelayedPort: number;
  take(): Promise<string[]>;
  child: ChildProcess;
}

async function startProxy(root: string, target: URL): Promise<Proxy> {
  const child = fork(join(root, 'bench/pg-proxy-process.ts'), [target.hostname, target.port, String(DELAY_MS)], {
    execArgv: ['--import', 'tsx'],
    cwd: root,
    stdio: 'inherit',
  });
  const ports = await new Promise<{ port: number; undelayedPort: number }>((resolve) => child.once('message', resolve));
  const take = () =>
    new Promise<string[]>((resolve) => {
      child.once('message', (m: { statements: string[] }) => resolve(m.statements.filter((s) => s !== PROBE)));
      child.send('take');
    });
  return { ...ports, take, child };
}

/** The latency probe's process: rounds of `SELECT 1` times, one per URL. */
function startProbe(root: string) {
  const child = fork(join(root, 'bench/pg-probe-process.ts'), [], { execArgv: ['--import', 'tsx'], cwd: root, stdio: 'inherit' });
  const ask = <T>(message: object) =>
    new Promise<T>((resolve) => {
      child.once('message', resolve);
      child.send(message);
    });
  return {
    start: (urls: string[]) => ask<unknown>({ start: urls }),
    stop: async () => (await ask<{ rounds: number[][] }>({ stop: true })).rounds,
    child,
  };
}

const at = (url: string, port: number) => {
  const copy = new URL(url);
  copy.hostname = '127.0.0.1';
  copy.port = String(port);
  return copy.href;
};

/** A proxy's own added latency over rounds of [direct, undelayed, delayed]: p50 and p95, undelayed and beyond the delay. */
function added(rounds: number[][]) {
  const undelayed = rounds.map(([direct, via]) => (via as number) - (direct as number));
  const delayed = rounds.map(([direct, , via]) => (via as number) - (direct as number) - 2 * DELAY_MS);
  return {
    direct: percentile(
      rounds.map(([direct]) => direct as number),
      0.5,
    ),
    undelayed: [percentile(undelayed, 0.5), percentile(undelayed, 0.95)] as const,
    delayed: [percentile(delayed, 0.5), percentile(delayed, 0.95)] as const,
    rounds: rounds.length,
  };
}
const ms2 = ([p50, p95]: readonly [number, number]) => `${p50.toFixed(2)} / ${p95.toFixed(2)}`;

export async function benchPostgresDistance(options: { root: string; size: number; rounds: number; lagRate: number; lagCount: number }) {
  const { root } = options;
  const secret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-distance-'));
  const server = await startPostgres({ durable: true });
  const backends = await RoleBackends.watch(server);
  const serverPid = () => Number(readFileSync(join(server.dataDir as string, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const proxies = new Map<Recipe, Proxy>();
  for (const recipe of ['seed', 'ratchet'] as const) proxies.set(recipe, await startProxy(root, new URL(server.url)));
  const proxyOf = (recipe: Recipe) => proxies.get(recipe) as Proxy;
  const probe = startProbe(root);
  const generator = startGenerator(root);
  const started = new Map<string, Started>();
  try {
    for (const [recipe, place] of SYSTEMS) {
      const key = keyOf(recipe, place);
      const asRole = await backends.role(key, server.url);
      const url = place === 'here' ? asRole : at(asRole, proxyOf(recipe).port);
      started.set(
        key,
        recipe === 'seed'
          ? await startProcess(
              [process.execPath, '--import', 'tsx', 'bench/seed-server.ts', 'postgres', url, `seed_${place}`],
              { BENCH_SECRET: secret },
              /listening (\S+)/,
              root,
            )
          : await startProcess(
              [process.execPath, '--import', 'tsx', 'local/start.ts'],
              {
                PORT: '0',
                WEBHOOK_SIGNING_SECRETS: secret,
                ...(recipe === 'ratchet' ? { EFFECTS_WEBHOOK_URL: receiver.url, EFFECTS_SIGNING_SECRET: outbound } : {}),
                RATCHET_API_TOKEN: TOKEN,
                DATABASE_URL: url,
                DATABASE_SCHEMA: `distance_${key}`,
                DATA_DIR: join(work, key),
              },
              READY,
              root,
            ),
      );
    }
    const urlOf = (recipe: Recipe, place: Place) => {
      const s = started.get(keyOf(recipe, place)) as Started;
      return recipe === 'seed' ? s.url : `${s.url}/webhooks/gemini`;
    };
    const pidOf = (recipe: Recipe, place: Place) => (started.get(keyOf(recipe, place)) as Started).child.pid as number;
    /** The probe's URLs for a system's proxy (the bench's own role: its backends count for no system). */
    const probed = (recipe: Recipe) => [server.url, at(server.url, proxyOf(recipe).undelayedPort), at(server.url, proxyOf(recipe).port)];
    // Deliveries per play of each mix (the first has 20 % redeliveries on top of its size).
    const deliveriesIn = mixes('count', options.size).map((m) => m.deliveries.length);
    const play = async (recipe: Recipe, place: Place, prefix: string, mix: number) => {
      const role = keyOf(recipe, place);
      if (place === 'away') {
        await proxyOf(recipe).take();
        await probe.start(probed(recipe));
      }
      const effectsBefore = receiver.accepted.length;
      const processBefore = treeCpuMs(pidOf(recipe, place));
      const backendsBefore = await backends.cpuMs(role);
      const buffersBefore = await backends.buffers(role);
      const played = await generator.play(urlOf(recipe, place), secret, prefix, options.size, mix, SENDERS);
      const rounds = place === 'away' ? await probe.stop() : [];
      await settled(pidOf(recipe, place));
      await settled(serverPid());
      const statements = place === 'away' ? await proxyOf(recipe).take() : [];
      const count = (kind: string) => statements.filter((s) => classOf(s) === kind).length;
      const deliveries = deliveriesIn[mix] as number;
      return {
        perSecond: played.perSecond,
        p50: played.p50,
        processCpu: (treeCpuMs(pidOf(recipe, place)) - processBefore) / deliveries,
        backendCpu: ((await backends.cpuMs(role)) - backendsBefore) / deliveries,
        buffers: ((await backends.buffers(role)) - buffersBefore) / deliveries,
        notRecorded: played.notRecorded,
        effects: receiver.accepted.length - effectsBefore,
        webhookStatements: count('webhook'),
        effectStatements: count('effects'),
        otherStatements: count('other'),
        rounds,
      };
    };
    for (const [recipe, place] of SYSTEMS) for (const mix of [0, 1, 2]) await play(recipe, place, `warm-${recipe}-${place}`, mix);
    const labels = mixes('labels', 10).map((m) => m.label);
    type Sample = Awaited<ReturnType<typeof play>>;
    const samples = new Map<string, Sample[]>();
    for (let round = 0; round < options.rounds; round++)
      for (const [i] of labels.entries())
        for (const [k] of SYSTEMS.entries()) {
          const [recipe, place] = SYSTEMS[(k + round + i) % SYSTEMS.length] as (typeof SYSTEMS)[number];
          const key = `${i}|${keyOf(recipe, place)}`;
          samples.set(key, [...(samples.get(key) ?? []), await play(recipe, place, `${keyOf(recipe, place)}-${round}`, i)]);
        }
    const list = (mix: number, recipe: Recipe, place: Place) => samples.get(`${mix}|${keyOf(recipe, place)}`) ?? [];
    const of = (mix: number, recipe: Recipe, place: Place, field: 'perSecond' | 'p50' | 'processCpu' | 'backendCpu' | 'buffers') =>
      percentile(
        list(mix, recipe, place).map((s) => s[field]),
        0.5,
      );
    const cpuOf = (mix: number, recipe: Recipe, place: Place) =>
      of(mix, recipe, place, 'processCpu') + of(mix, recipe, place, 'backendCpu');
    const cpuText = (mix: number, recipe: Recipe, place: Place) =>
      `${of(mix, recipe, place, 'processCpu').toFixed(2)} + ${of(mix, recipe, place, 'backendCpu').toFixed(2)}`;
    const addedOf = (mix: number, recipe: Recipe) => added(list(mix, recipe, 'away').flatMap((s) => s.rounds));

    console.log('\n## PostgreSQL at network distance: one instance beside the seed’s recipe on the same server\n');
    console.log(
      `${options.size} deliveries per mix, ${SENDERS} senders, ${options.rounds} interleaved rounds (medians), effects on for Ratchet; away: every chunk held ${DELAY_MS} ms each way, each system through a proxy process of its own; CPU: each system's process + its own PostgreSQL backends (by role); Node ${process.version}\n`,
    );
    console.log(
      `| mix | database | seed /s | Ratchet /s | × the seed | p50 ms, seed → Ratchet | CPU ms per delivery, seed / Ratchet: process + own backends | × the seed | the proxy's own added latency, ms p50 / p95 beyond ${2 * DELAY_MS} ms: seed's / Ratchet's |`,
    );
    console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const [i, label] of labels.entries())
      for (const place of ['here', 'away'] as const) {
        const seed = of(i, 'seed', place, 'perSecond');
        const ratchet = of(i, 'ratchet', place, 'perSecond');
        console.log(
          `| ${label} | ${place === 'here' ? 'this machine' : `${DELAY_MS} ms away each way`} | ${seed.toFixed(0)} | ${ratchet.toFixed(0)} | ${(ratchet / seed).toFixed(2)} | ${of(i, 'seed', place, 'p50').toFixed(1)} → ${of(i, 'ratchet', place, 'p50').toFixed(1)} | ${cpuText(i, 'seed', place)} / ${cpuText(i, 'ratchet', place)} | ${(cpuOf(i, 'ratchet', place) / cpuOf(i, 'seed', place)).toFixed(2)} | ${place === 'here' ? '—' : `${ms2(addedOf(i, 'seed').delayed)} / ${ms2(addedOf(i, 'ratchet').delayed)}`} |`,
        );
      }
    const lost = [...samples]
      .filter(([key]) => !key.includes('seed'))
      .reduce((n, [, s]) => n + s.reduce((m, x) => m + x.notRecorded, 0), 0);
    console.log(`\nRatchet answered 503 (not recorded; the sender retries): ${lost}`);

    console.log(
      `\nThe proxies measured: during each play through a proxy, \`SELECT 1\` timed in turn directly, through that proxy process's undelayed listener, and through the delayed one the load takes (${DELAY_MS} ms each way); added = through − direct (− ${2 * DELAY_MS} ms for the delayed):\n`,
    );
    console.log('| mix | proxy | probes | direct p50 ms | undelayed: added p50 / p95 ms | delayed: added beyond the delay p50 / p95 ms |');
    console.log('|---|---|---:|---:|---:|---:|');
    for (const [i, label] of labels.entries())
      for (const recipe of ['seed', 'ratchet'] as const) {
        const a = addedOf(i, recipe);
        console.log(
          `| ${label} | ${recipe === 'seed' ? 'the seed’s' : 'Ratchet’s'} | ${a.rounds} | ${a.direct.toFixed(2)} | ${ms2(a.undelayed)} | ${ms2(a.delayed)} |`,
        );
      }

    console.log('\nRatchet without effects (no outbound sink), this machine, in the same rounds:\n');
    console.log(
      '| mix | without effects /s | × the seed | CPU ms per delivery: process + own backends | × the seed | with effects: process + own backends | the effects add: process / backends |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const [i, label] of labels.entries()) {
      const quiet = of(i, 'quiet', 'here', 'perSecond');
      console.log(
        `| ${label} | ${quiet.toFixed(0)} | ${(quiet / of(i, 'seed', 'here', 'perSecond')).toFixed(2)} | ${cpuText(i, 'quiet', 'here')} | ${(cpuOf(i, 'quiet', 'here') / cpuOf(i, 'seed', 'here')).toFixed(2)} | ${cpuText(i, 'ratchet', 'here')} | ${(of(i, 'ratchet', 'here', 'processCpu') - of(i, 'quiet', 'here', 'processCpu')).toFixed(2)} / ${(of(i, 'ratchet', 'here', 'backendCpu') - of(i, 'quiet', 'here', 'backendCpu')).toFixed(2)} |`,
      );
    }

    console.log(
      '\nStatements per delivery at each proxy (round trips; the database away), and shared buffers per delivery (this machine):\n',
    );
    console.log(
      '| mix | seed per delivery | Ratchet: all per delivery | the webhook’s per delivery | effects’ per effect delivered | the rest per delivery | buffers per delivery: seed / Ratchet / without effects |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|');
    for (const [i, label] of labels.entries()) {
      const away = (recipe: Recipe) => list(i, recipe, 'away');
      const sum = (recipe: Recipe, field: 'webhookStatements' | 'effectStatements' | 'otherStatements' | 'effects') =>
        away(recipe).reduce((n, s) => n + s[field], 0);
      const deliveries = (recipe: Recipe) => away(recipe).length * (deliveriesIn[i] as number);
      const effects = sum('ratchet', 'effects');
      console.log(
        `| ${label} | ${((sum('seed', 'webhookStatements') + sum('seed', 'effectStatements') + sum('seed', 'otherStatements')) / deliveries('seed')).toFixed(2)} | ${((sum('ratchet', 'webhookStatements') + sum('ratchet', 'effectStatements') + sum('ratchet', 'otherStatements')) / deliveries('ratchet')).toFixed(2)} | ${(sum('ratchet', 'webhookStatements') / deliveries('ratchet')).toFixed(2)} | ${effects >= 50 ? (sum('ratchet', 'effectStatements') / effects).toFixed(2) : `(${effects} effects)`} | ${(sum('ratchet', 'otherStatements') / deliveries('ratchet')).toFixed(2)} | ${of(i, 'seed', 'here', 'buffers').toFixed(1)} / ${of(i, 'ratchet', 'here', 'buffers').toFixed(1)} / ${of(i, 'quiet', 'here', 'buffers').toFixed(1)} |`,
      );
    }

    console.log(`\nOne instance's effect lag at ${options.lagRate}/s offered (${options.lagCount} fresh state changes):\n`);
    console.log(
      `| database | achieved /s | effect lag p50 / p95 ms | not delivered | buffers per effect, its claims | the proxy's own added latency, ms p50 / p95 beyond ${2 * DELAY_MS} ms |`,
    );
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const place of ['here', 'away'] as const) {
      const role = keyOf('ratchet', place);
      if (place === 'away') await probe.start(probed('ratchet'));
      const claimsBefore = await backends.buffers(role, CLAIM);
      const offered = await generator.offer(urlOf('ratchet', place), secret, `lag-${place}`, options.lagRate, options.lagCount);
      const acknowledged = Object.entries(offered.acknowledged);
      const deadline = Date.now() + 60_000;
      while (acknowledged.some(([name]) => !receiver.firstAcceptedAt.has(`${name}#1`)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      const rounds = place === 'away' ? await probe.stop() : [];
      const lags = acknowledged.map(([name, at]) => (receiver.firstAcceptedAt.get(`${name}#1`) ?? Number.NaN) - at);
      const delivered = lags.filter((lag) => !Number.isNaN(lag)).length;
      const claims = (await backends.buffers(role, CLAIM)) - claimsBefore;
      console.log(
        `| ${place === 'here' ? 'this machine' : `${DELAY_MS} ms away each way`} | ${offered.achievedRate.toFixed(0)} | ${percentile(lags, 0.5).toFixed(0)} / ${percentile(lags, 0.95).toFixed(0)} | ${lags.length - delivered} | ${(claims / delivered).toFixed(1)} | ${place === 'here' ? '—' : ms2(added(rounds).delayed)} |`,
      );
    }
  } finally {
    for (const s of started.values()) await stopProcess(s);
    generator.stop();
    probe.child.kill();
    for (const proxy of proxies.values()) proxy.child.kill();
    await backends.stop();
    await receiver.stop();
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  }
}
