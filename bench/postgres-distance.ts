/**
 * PostgreSQL at network distance (`BENCH_SECTIONS=postgres-distance`): one
 * Ratchet instance (effects on, to a receiver) beside the seed's recipe on
 * the same PostgreSQL server (read, then update on the version read: two
 * autocommitted statements per delivery, bench/seed-baseline.ts), each on
 * this machine's server directly and through a proxy that holds every chunk
 * 1 ms each way (bench/pg-proxy-process.ts: the database a zone away). The
 * same three mixes, 32 senders at a time, interleaved rounds (medians):
 * deliveries a second, p50 answer time, CPU per delivery with the server's
 * processes counted (the proxy's are the network's, not counted), and, at
 * the proxy, the statements each system sent per delivery, Ratchet's split
 * into the webhook's, the effects' (claims, settles, renewals) and the rest
 * (NOTIFY, the feed's and the queue's polls). Then one instance's effect lag
 * at BENCH_PG_LAG_RATE fresh state changes a second, here and away.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newSecret } from '../test/support/deliveries.ts';
import { startPostgres } from '../test/support/postgres.ts';
import { Receiver } from '../test/support/receiver.ts';
import { mixes, percentile } from './mixes.ts';
import { type Started, settled, startGenerator, startProcess, stopProcess, treeCpuMs } from './processes.ts';

const READY = /Ratchet ready at (http:\/\/\S+) /;
const TOKEN = 'bench-api-token-0123456789abcdef';
const SENDERS = 32;
const DELAY_MS = 1;

type Place = 'here' | 'away';
type Recipe = 'seed' | 'ratchet';
const SYSTEMS = [
  ['seed', 'here'],
  ['ratchet', 'here'],
  ['seed', 'away'],
  ['ratchet', 'away'],
] as const;
const keyOf = (recipe: Recipe, place: Place) => `${recipe}-${place}`;

/** What kind of work a statement the proxy saw was. */
function classOf(statement: string): 'webhook' | 'effects' | 'other' {
  if (/held AS|seen AS|seed_|_write$|_note$/.test(statement)) return 'webhook';
  if (/WITH ready AS|WITH settled AS|SET claimed_until = \$4|_claim$|_settle$/.test(statement)) return 'effects';
  return 'other';
}

export async function benchPostgresDistance(options: { root: string; size: number; rounds: number; lagRate: number; lagCount: number }) {
  const { root } = options;
  const secret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-distance-'));
  const server = await startPostgres({ durable: true });
  const serverPid = () => Number(readFileSync(join(server.dataDir as string, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const target = new URL(server.url);
  const proxy = fork(join(root, 'bench/pg-proxy-process.ts'), [target.hostname, target.port, String(DELAY_MS)], {
    execArgv: ['--import', 'tsx'],
    cwd: root,
    stdio: 'inherit',
  });
  const proxyPort = await new Promise<number>((resolve) => proxy.once('message', (m: { port: number }) => resolve(m.port)));
  const take = () =>
    new Promise<string[]>((resolve) => {
      proxy.once('message', (m: { statements: string[] }) => resolve(m.statements));
      proxy.send('take');
    });
  const away = new URL(server.url);
  away.hostname = '127.0.0.1';
  away.port = String(proxyPort);
  const urlAt = (place: Place) => (place === 'here' ? server.url : away.href);
  const generator = startGenerator(root);
  const started = new Map<string, Started>();
  try {
    for (const [recipe, place] of SYSTEMS) {
      const key = keyOf(recipe, place);
      started.set(
        key,
        recipe === 'seed'
          ? await startProcess(
              [process.execPath, '--import', 'tsx', 'bench/seed-server.ts', 'postgres', urlAt(place), `seed_${place}`],
              { BENCH_SECRET: secret },
              /listening (\S+)/,
              root,
            )
          : await startProcess(
              [process.execPath, '--import', 'tsx', 'local/start.ts'],
              {
                PORT: '0',
                WEBHOOK_SIGNING_SECRETS: secret,
                EFFECTS_WEBHOOK_URL: receiver.url,
                EFFECTS_SIGNING_SECRET: outbound,
                RATCHET_API_TOKEN: TOKEN,
                DATABASE_URL: urlAt(place),
                DATABASE_SCHEMA: `distance_${place}`,
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
    const cpuOf = (recipe: Recipe, place: Place) => treeCpuMs(pidOf(recipe, place)) + treeCpuMs(serverPid());
    // Deliveries per play of each mix (the first has 20 % redeliveries on top of its size).
    const deliveriesIn = mixes('count', options.size).map((m) => m.deliveries.length);
    const play = async (recipe: Recipe, place: Place, prefix: string, mix: number) => {
      await take();
      const effectsBefore = receiver.accepted.length;
      const before = cpuOf(recipe, place);
      const played = await generator.play(urlOf(recipe, place), secret, prefix, options.size, mix, SENDERS);
      await settled(pidOf(recipe, place));
      await settled(serverPid());
      const statements = place === 'away' ? await take() : [];
      const count = (kind: string) => statements.filter((s) => classOf(s) === kind).length;
      return {
        perSecond: played.perSecond,
        p50: played.p50,
        cpu: (cpuOf(recipe, place) - before) / (deliveriesIn[mix] as number),
        notRecorded: played.notRecorded,
        effects: receiver.accepted.length - effectsBefore,
        webhookStatements: count('webhook'),
        effectStatements: count('effects'),
        otherStatements: count('other'),
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
    const of = (mix: number, recipe: Recipe, place: Place, field: keyof Sample) =>
      percentile(
        (samples.get(`${mix}|${keyOf(recipe, place)}`) ?? []).map((s) => s[field]),
        0.5,
      );
    console.log('\n## PostgreSQL at network distance: one instance beside the seed’s recipe on the same server\n');
    console.log(
      `${options.size} deliveries per mix, ${SENDERS} senders, ${options.rounds} interleaved rounds (medians), effects on for Ratchet; away: every chunk held ${DELAY_MS} ms each way; Node ${process.version}\n`,
    );
    console.log(
      '| mix | database | seed /s | Ratchet /s | × the seed | p50 ms, seed → Ratchet | CPU ms per delivery, seed / Ratchet (the server counted) | × the seed |',
    );
    console.log('|---|---|---:|---:|---:|---:|---:|---:|');
    for (const [i, label] of labels.entries())
      for (const place of ['here', 'away'] as const) {
        const seed = of(i, 'seed', place, 'perSecond');
        const ratchet = of(i, 'ratchet', place, 'perSecond');
        const cpuSeed = of(i, 'seed', place, 'cpu');
        const cpuRatchet = of(i, 'ratchet', place, 'cpu');
        console.log(
          `| ${label} | ${place === 'here' ? 'this machine' : `${DELAY_MS} ms away each way`} | ${seed.toFixed(0)} | ${ratchet.toFixed(0)} | ${(ratchet / seed).toFixed(2)} | ${of(i, 'seed', place, 'p50').toFixed(1)} → ${of(i, 'ratchet', place, 'p50').toFixed(1)} | ${cpuSeed.toFixed(2)} / ${cpuRatchet.toFixed(2)} | ${(cpuRatchet / cpuSeed).toFixed(2)} |`,
        );
      }
    const lost = [...samples]
      .filter(([key]) => key.includes('ratchet'))
      .reduce((n, [, s]) => n + s.reduce((m, x) => m + x.notRecorded, 0), 0);
    console.log(`\nRatchet answered 503 (not recorded; the sender retries): ${lost}`);
    console.log('\nStatements per delivery at the proxy (round trips; the database away):\n');
    console.log(
      '| mix | seed per delivery | Ratchet: all per delivery | the webhook’s per delivery | effects’ per effect delivered | the rest per delivery |',
    );
    console.log('|---|---:|---:|---:|---:|---:|');
    for (const [i, label] of labels.entries()) {
      const list = (recipe: Recipe) => samples.get(`${i}|${keyOf(recipe, 'away')}`) ?? [];
      const sum = (recipe: Recipe, field: 'webhookStatements' | 'effectStatements' | 'otherStatements' | 'effects') =>
        list(recipe).reduce((n, s) => n + s[field], 0);
      const deliveries = (recipe: Recipe) => list(recipe).length * (deliveriesIn[i] as number);
      const effects = sum('ratchet', 'effects');
      console.log(
        `| ${label} | ${(sum('seed', 'webhookStatements') / deliveries('seed')).toFixed(2)} | ${((sum('ratchet', 'webhookStatements') + sum('ratchet', 'effectStatements') + sum('ratchet', 'otherStatements')) / deliveries('ratchet')).toFixed(2)} | ${(sum('ratchet', 'webhookStatements') / deliveries('ratchet')).toFixed(2)} | ${effects >= 50 ? (sum('ratchet', 'effectStatements') / effects).toFixed(2) : `(${effects} effects)`} | ${(sum('ratchet', 'otherStatements') / deliveries('ratchet')).toFixed(2)} |`,
      );
    }

    console.log(`\nOne instance's effect lag at ${options.lagRate}/s offered (${options.lagCount} fresh state changes):\n`);
    console.log('| database | achieved /s | effect lag p50 / p95 ms | not delivered |');
    console.log('|---|---:|---:|---:|');
    for (const place of ['here', 'away'] as const) {
      const offered = await generator.offer(urlOf('ratchet', place), secret, `lag-${place}`, options.lagRate, options.lagCount);
      const acknowledged = Object.entries(offered.acknowledged);
      const deadline = Date.now() + 60_000;
      while (acknowledged.some(([name]) => !receiver.firstAcceptedAt.has(`${name}#1`)) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      const lags = acknowledged.map(([name, at]) => (receiver.firstAcceptedAt.get(`${name}#1`) ?? Number.NaN) - at);
      console.log(
        `| ${place === 'here' ? 'this machine' : `${DELAY_MS} ms away each way`} | ${offered.achievedRate.toFixed(0)} | ${percentile(lags, 0.5).toFixed(0)} / ${percentile(lags, 0.95).toFixed(0)} | ${lags.filter(Number.isNaN).length} |`,
      );
    }
  } finally {
    for (const s of started.values()) await stopProcess(s);
    generator.stop();
    proxy.kill();
    await receiver.stop();
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  }
}
