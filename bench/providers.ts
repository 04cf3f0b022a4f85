/**
 * Issue 58's measure: a mixed-provider storm beside the Gemini-only storm, in
 * one run, alternating rounds, against one Ratchet on SQLite (`local/start.ts`
 * as a process, its outbound sink on) with fake OpenAI and Anthropic servers
 * up (test/support/fake-*.ts, in this process: they stand for the providers,
 * their CPU is not the system's).
 *
 * - Gemini-only: `size` signed Gemini deliveries, the embedded section's first
 *   mix's shape (each batch's `batch.succeeded` once, every fifth sent twice
 *   with the same webhook-id), shuffled, 8 at a time.
 * - Mixed: the same count, a third each: Gemini's as above; OpenAI's
 *   (`POST /webhooks/openai`, `batch.completed`, `response.completed`,
 *   `video.completed` in turn, every fifth sent twice, the fake answering
 *   each job completed, so that reconcile's poll after the bare webhook
 *   brings the outcome, a write of its own); and Anthropic Message Batches,
 *   which send nothing: each one `POST /operations` (counted as one delivery),
 *   the fake answering it `ended`, so that reconcile's poll ends it.
 *
 * A storm has settled when the receiver holds each job's last effect
 * (`operation.result` for OpenAI's, the SUCCEEDED state change for the rest)
 * and the processes have gone quiet; its CPU is the runtime's and its
 * derived-work process's from the first request to then, polls included.
 * Deliveries/s and p50/p99 are the load generator's, over the requests alone.
 * Lost: a job whose stored state or outcome is not the one sent (read after),
 * or whose last effect never came.
 *
 * Then, to see where the mixed storm's time goes: each third alone, and a
 * control, Gemini deliveries sent one at a time at about the polls' pace, so
 * that each write is a commit of its own, as each poll's is.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newSecret, signedDelivery } from '../test/support/deliveries.ts';
import { anthropicBatch, startFakeAnthropic } from '../test/support/fake-anthropic.ts';
import { openaiBatch, openaiDelivery, openaiResponse, openaiVideo, startFakeOpenAI } from '../test/support/fake-openai.ts';
import { Receiver } from '../test/support/receiver.ts';
import { shuffle } from '../test/support/shuffle.ts';
import type { GeneratorRequest, Offered, Played } from './load-generator.ts';
import { type PreparedRequest, percentile } from './mixes.ts';
import { cpuMs, type Started, settled, startProcess, stopProcess, treeCpuMs } from './processes.ts';

export interface ProvidersOptions {
  root: string;
  /** Deliveries per storm. */
  size: number;
  rounds: number;
}

type StormName = 'gemini-only' | 'mixed';
/** A third of the mixed storm played alone, to see what each costs. */
type Third = 'gemini' | 'openai' | 'anthropic';
/** What a job must hold once settled, by what it is. */
type Expected = 'gemini' | 'openai-batch' | 'openai-response' | 'openai-video' | 'anthropic-batch';
interface Job {
  name: string;
  expected: Expected;
}
interface Storm {
  requests: PreparedRequest[];
  jobs: Job[];
}
interface Sample {
  deliveries: number;
  perSecond: number;
  p50: number;
  p99: number;
  /** CPU ms per delivery of the runtime and its derived-work process, the polls and effects after the last answer included. */
  cpu: number;
  /** The same, of the runtime process alone (it answers and polls). */
  cpuMain: number;
  /** The same, until the last answer only: the deliveries' own cost, before the polls the storm left. */
  cpuAnswering: number;
  /** From the first request to the last job's last effect, in seconds. */
  settledS: number;
  /** Requests the fake providers answered (reconcile's polls) per delivery. */
  polls: number;
  notRecorded: number;
  lost: number;
}

const CONCURRENCY = 8;
/** The control's pace, deliveries a second: about the pace of the polls a mixed storm leaves (OpenAI's key 5, Anthropic's 10). */
const PACED_RATE = 10;
const API_TOKEN = 'bench-api-token-0123456789abcdef';
/**
 * Reconcile at its default period. A short one starves under a backlog: a run polls at the key's pace until its
 * budget (0.8 of the period) runs out, and the jobs it claimed but did not reach wait out the claim (the budget + 15
 * s) before another run takes them; a minute's budget reaches every job of a 500-delivery storm.
 */
const RECONCILE_INTERVAL_SECONDS = 60;
const READY = /Ratchet ready at (http:\/\/\S+) /;
const median = (xs: number[]) => percentile(xs, 0.5);

/** The load generator (load-generator.ts) in a process of its own, asked one thing at a time (processes.ts's asks `play` and `offer` only). */
function startRequestGenerator(root: string) {
  const child: ChildProcess = fork(join(root, 'bench/load-generator.ts'), [], {
    execArgv: ['--import', 'tsx'],
    cwd: root,
    stdio: 'inherit',
  });
  const ask = <T>(request: GeneratorRequest) =>
    new Promise<T>((resolve, reject) => {
      child.once('message', (reply: { ok: boolean; answer?: T; message?: string }) =>
        reply.ok ? resolve(reply.answer as T) : reject(new Error(`load generator: ${reply.message}`)),
      );
      child.send(request);
    });
  return {
    play: (requests: PreparedRequest[]) => ask<Played>({ type: 'requests', requests, concurrency: CONCURRENCY }),
    offer: (url: string, secret: string, prefix: string, rate: number, count: number) =>
      ask<Offered>({ type: 'offer', url, secret, prefix, rate, count }),
    stop: () => child.kill(),
  };
}

export async function benchProviders(options: ProvidersOptions): Promise<void> {
  const { root } = options;
  const geminiSecret = newSecret();
  const openaiSecret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  const openai = await startFakeOpenAI();
  const anthropic = await startFakeAnthropic();
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-providers-'));
  const generator = startRequestGenerator(root);
  let ratchet: Started | undefined;
  try {
    ratchet = await startProcess(
      [process.execPath, '--import', 'tsx', 'local/start.ts'],
      {
        DATA_DIR: join(work, 'data'),
        PORT: '0',
        WEBHOOK_SIGNING_SECRETS: geminiSecret,
        EFFECTS_WEBHOOK_URL: receiver.url,
        EFFECTS_SIGNING_SECRET: outbound,
        RATCHET_API_TOKEN: API_TOKEN,
        OPENAI_API_KEY: 'sk-bench',
        OPENAI_BASE_URL: openai.url,
        OPENAI_WEBHOOK_SECRET: openaiSecret,
        ANTHROPIC_API_KEY: 'sk-ant-bench',
        ANTHROPIC_BASE_URL: anthropic.url,
        RECONCILE_INTERVAL_SECONDS: String(RECONCILE_INTERVAL_SECONDS),
      },
      READY,
      root,
    );
    const url = ratchet.url;
    const pid = ratchet.child.pid as number;

    /** `count` Gemini deliveries: each batch's terminal webhook, every fifth sent twice (same webhook-id, same body). */
    const gemini = (prefix: string, count: number): Storm => {
      const storm: Storm = { requests: [], jobs: [] };
      for (let i = 0; storm.requests.length < count; i++) {
        const name = `batches/${prefix}-g${i}`;
        const body = JSON.stringify({ type: 'batch.succeeded', version: 'v1', timestamp: new Date().toISOString(), data: { id: name } });
        const delivery = { url: `${url}/webhooks/gemini`, ...signedDelivery(geminiSecret, body, { id: `msg_${prefix}_g${i}` }) };
        storm.jobs.push({ name, expected: 'gemini' });
        storm.requests.push(delivery);
        if (i % 5 === 0 && storm.requests.length < count) storm.requests.push(delivery);
      }
      return storm;
    };
    /** `count` OpenAI deliveries, a batch's, a background response's and a video's in turn, each job completed at the fake; every fifth sent twice. */
    const openaiStorm = (count: number): Storm => {
      const storm: Storm = { requests: [], jobs: [] };
      for (let i = 0; storm.requests.length < count; i++) {
        const [kind, object, type, expected] =
          i % 3 === 0
            ? (['batch', openaiBatch({ status: 'completed' }), 'batch.completed', 'openai-batch'] as const)
            : i % 3 === 1
              ? (['response', openaiResponse({ status: 'completed' }), 'response.completed', 'openai-response'] as const)
              : (['video', openaiVideo({ status: 'completed' }), 'video.completed', 'openai-video'] as const);
        openai.set(kind, object);
        const id = object.id as string;
        const path = { batch: 'batches', response: 'responses', video: 'videos' }[kind];
        const delivery = { url: `${url}/webhooks/openai`, ...openaiDelivery(openaiSecret, { type, id }) };
        storm.jobs.push({ name: `openai/${path}/${id}`, expected });
        storm.requests.push(delivery);
        if (i % 5 === 0 && storm.requests.length < count) storm.requests.push(delivery);
      }
      return storm;
    };
    /** `count` Anthropic Message Batches, each ended at the fake and tracked by one POST /operations. */
    const anthropicStorm = (count: number): Storm => {
      const storm: Storm = { requests: [], jobs: [] };
      for (let i = 0; i < count; i++) {
        const batch = anthropicBatch({ processing_status: 'ended' });
        anthropic.set(batch);
        const name = `anthropic/messages/batches/${batch.id as string}`;
        storm.jobs.push({ name, expected: 'anthropic-batch' });
        storm.requests.push({
          url: `${url}/operations`,
          body: JSON.stringify({ name }),
          headers: { 'content-type': 'application/json', authorization: `Bearer ${API_TOKEN}` },
        });
      }
      return storm;
    };
    const stormOf = (storm: StormName | Third, prefix: string, size: number): Storm => {
      const third = Math.round(size / 3);
      const parts =
        storm === 'gemini-only' || storm === 'gemini'
          ? [gemini(prefix, size)]
          : storm === 'openai'
            ? [openaiStorm(size)]
            : storm === 'anthropic'
              ? [anthropicStorm(size)]
              : [gemini(prefix, third), openaiStorm(third), anthropicStorm(size - 2 * third)];
      return {
        requests: shuffle(
          parts.flatMap((p) => p.requests),
          size,
        ),
        jobs: parts.flatMap((p) => p.jobs),
      };
    };

    /** Whether a job's stored record is what its provider said, outcome included. */
    const holds = (job: Job, record: OperationRecord): boolean => {
      if (record.state !== 'SUCCEEDED' || record.resultPending) return false;
      const result = record.result ?? undefined;
      switch (job.expected) {
        case 'gemini':
          return true;
        case 'openai-batch':
          return result?.requestCounts?.total === 100 && result.requestCounts.succeeded === 98 && result.requestCounts.failed === 2;
        case 'openai-response':
          return result?.usage?.totalTokens === 17;
        case 'openai-video':
          return result !== undefined && record.version >= 2;
        case 'anthropic-batch':
          return record.providerState === 'ended' && result?.requestCounts?.total === 10 && result.requestCounts.succeeded === 9;
      }
    };
    /** A job's last effect: OpenAI's outcome comes after its state, as `operation.result`. */
    const isLast = (job: Job, effect: Effect) =>
      job.expected.startsWith('openai-')
        ? effect.type === 'operation.result'
        : effect.type === 'operation.state_changed' && effect.data.state === 'SUCCEEDED';

    /**
     * Waits until the receiver holds each name's last effect (`isLast` says which), or `limitMs`; the names whose last
     * effect never came stay in `waiting`.
     */
    const lastEffects = (waiting: Map<string, (effect: Effect) => boolean>, limitMs: number) => {
      let lastAt = 0;
      let timer: NodeJS.Timeout | undefined;
      const allIn = new Promise<void>((resolve) => {
        receiver.onAccepted = () => {
          const effect = receiver.accepted.at(-1)?.body;
          if (effect && waiting.get(effect.data.name)?.(effect)) {
            waiting.delete(effect.data.name);
            lastAt = performance.now();
            if (waiting.size === 0) resolve();
          }
        };
      });
      const done = Promise.race([allIn, new Promise((resolve) => (timer = setTimeout(resolve, limitMs)))]).finally(() => {
        clearTimeout(timer);
        receiver.onAccepted = undefined;
      });
      return { done, lastAt: () => lastAt };
    };

    const play = async (storm: StormName | Third, prefix: string, size: number): Promise<Sample> => {
      const { requests, jobs } = stormOf(storm, prefix, size);
      const waiting = new Map(jobs.map((job) => [job.name, (effect: Effect) => isLast(job, effect)]));
      // Every OpenAI and Anthropic job waits for a reconcile run, then its poll at the key's pace (5 and 10 a second).
      const last = lastEffects(waiting, (2 * RECONCILE_INTERVAL_SECONDS + 60) * 1000 + jobs.length * 400);
      const pollsBefore = openai.requests.length + anthropic.requests.length;
      const [cpuBefore, mainBefore] = [treeCpuMs(pid), cpuMs(pid)];
      const started = performance.now();
      const played = await generator.play(requests);
      const cpuAnswering = treeCpuMs(pid) - cpuBefore;
      await last.done;
      await settled(pid);
      const cpu = treeCpuMs(pid) - cpuBefore;
      const cpuMain = cpuMs(pid) - mainBefore;
      const polls = openai.requests.length + anthropic.requests.length - pollsBefore;
      // Read outside the measured part.
      let lost = 0;
      for (const job of jobs) {
        const answer = await fetch(`${url}/operations/${job.name}`, { headers: { authorization: `Bearer ${API_TOKEN}` } });
        if (waiting.has(job.name) || answer.status !== 200 || !holds(job, (await answer.json()) as OperationRecord)) lost++;
      }
      return {
        deliveries: requests.length,
        perSecond: played.perSecond,
        p50: played.p50,
        p99: played.p99,
        cpu: cpu / requests.length,
        cpuMain: cpuMain / requests.length,
        cpuAnswering: cpuAnswering / requests.length,
        settledS: ((waiting.size === 0 ? last.lastAt() : performance.now()) - started) / 1000,
        polls: polls / requests.length,
        notRecorded: played.notRecorded,
        lost,
      };
    };

    // Warm-up: JIT, the SDKs loaded, the page cache.
    for (const storm of ['gemini-only', 'mixed'] as const) await play(storm, `warm-${storm}`, options.size);
    const samples: Record<StormName, Sample[]> = { 'gemini-only': [], mixed: [] };
    for (let round = 0; round < options.rounds; round++) {
      const order: StormName[] = round % 2 === 0 ? ['gemini-only', 'mixed'] : ['mixed', 'gemini-only'];
      for (const storm of order) samples[storm].push(await play(storm, `${storm}-${round}`, options.size));
    }
    // The control: Gemini deliveries one at a time, at about the polls' pace, so that no write shares its commit.
    const paced = async (prefix: string, count: number) => {
      const waiting = new Map(
        Array.from({ length: count }, (_, i) => [`batches/${prefix}-${i}`, (effect: Effect) => effect.type === 'operation.state_changed']),
      );
      const last = lastEffects(waiting, 60_000 + (count * 1000) / PACED_RATE);
      const before = treeCpuMs(pid);
      const offered = await generator.offer(`${url}/webhooks/gemini`, geminiSecret, prefix, PACED_RATE, count);
      await last.done;
      await settled(pid);
      return {
        cpu: (treeCpuMs(pid) - before) / count,
        wrong: waiting.size + offered.unavailable + offered.other + offered.reset,
      };
    };
    const pacedCount = Math.round(options.size / 3);
    const thirds: Array<[Third, Sample]> = [];
    for (const third of ['gemini', 'openai', 'anthropic'] as const) thirds.push([third, await play(third, `alone-${third}`, pacedCount)]);
    const control = [];
    for (let round = 0; round < options.rounds; round++) control.push(await paced(`paced-${round}`, pacedCount));
    const of = (storm: StormName, field: keyof Sample) => median(samples[storm].map((s) => s[field]));
    const sum = (storm: StormName, field: keyof Sample) => samples[storm].reduce((n, s) => n + s[field], 0);

    console.log('\n## Providers: a mixed-provider storm beside the Gemini-only storm\n');
    console.log(
      `${options.size} deliveries per storm (mixed: a third Gemini webhooks, a third OpenAI webhooks, a third Anthropic batches tracked by POST /operations), ${CONCURRENCY} at a time, ${options.rounds} alternating rounds (medians), one Ratchet on SQLite with its sink on, reconcile every ${RECONCILE_INTERVAL_SECONDS} s, Node ${process.version}\n`,
    );
    const cpuCell = (cpu: number, main: number) => `${cpu.toFixed(2)} (${main.toFixed(2)} + ${(cpu - main).toFixed(2)})`;
    /** CPU ms per poll after the last answer: each poll, its write or writes and their effects (and whatever else ran meanwhile). */
    const perPoll = (sample: Sample) => (sample.polls > 0 ? ((sample.cpu - sample.cpuAnswering) / sample.polls).toFixed(2) : '–');
    console.log(
      '| storm | deliveries/s | p50 / p99 ms | CPU ms per delivery: all (runtime + the rest) | until the last answer | polls per delivery | CPU ms per poll after the last answer | settled after s | 503 | lost |',
    );
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const storm of ['gemini-only', 'mixed'] as const)
      console.log(
        `| ${storm} | ${of(storm, 'perSecond').toFixed(0)} | ${of(storm, 'p50').toFixed(1)} / ${of(storm, 'p99').toFixed(1)} | ${cpuCell(of(storm, 'cpu'), of(storm, 'cpuMain'))} | ${of(storm, 'cpuAnswering').toFixed(2)} | ${of(storm, 'polls').toFixed(2)} | ${storm === 'mixed' ? median(samples.mixed.map((m) => (m.cpu - m.cpuAnswering) / m.polls)).toFixed(2) : '–'} | ${of(storm, 'settledS').toFixed(1)} | ${sum(storm, 'notRecorded')} | ${sum(storm, 'lost')} |`,
      );
    const ratio = (field: keyof Sample) => of('mixed', field) / of('gemini-only', field);
    const byRound = (field: keyof Sample) =>
      samples.mixed.map((s, i) => (s[field] / (samples['gemini-only'][i] as Sample)[field]).toFixed(2)).join(', ');
    const verdict = (value: number, target: number, above: boolean) =>
      (above ? value >= target : value <= target) ? 'met' : `missed by ${(Math.abs(value - target) * 100).toFixed(0)} points`;
    const throughput = ratio('perSecond');
    const cpu = ratio('cpu');
    console.log(
      `\nMixed / Gemini-only: deliveries/s ×${throughput.toFixed(2)} (target ≥ 0.90: ${verdict(throughput, 0.9, true)}; by round ${byRound('perSecond')}); CPU per delivery ×${cpu.toFixed(2)} (target ≤ 1.10: ${verdict(cpu, 1.1, false)}; by round ${byRound('cpu')}); until the last answer ×${ratio('cpuAnswering').toFixed(2)}`,
    );
    console.log(
      `\nEach third of the mixed storm alone (${pacedCount} deliveries, once):\n\n| third | deliveries/s | p50 / p99 ms | CPU ms per delivery: all (runtime + the rest) | until the last answer | polls per delivery | CPU ms per poll after the last answer | settled after s | lost |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|`,
    );
    for (const [third, s] of thirds)
      console.log(
        `| ${third} | ${s.perSecond.toFixed(0)} | ${s.p50.toFixed(1)} / ${s.p99.toFixed(1)} | ${cpuCell(s.cpu, s.cpuMain)} | ${s.cpuAnswering.toFixed(2)} | ${s.polls.toFixed(2)} | ${perPoll(s)} | ${s.settledS.toFixed(1)} | ${s.lost} |`,
      );
    console.log(
      `\nControl: ${pacedCount} Gemini deliveries one at a time at ${PACED_RATE}/s (no write shares a commit), median of ${options.rounds}: ${median(control.map((c) => c.cpu)).toFixed(2)} CPU ms per delivery (×${(median(control.map((c) => c.cpu)) / of('gemini-only', 'cpu')).toFixed(2)} the Gemini-only storm's); not stored or refused: ${control.reduce((n, c) => n + c.wrong, 0)}`,
    );
  } finally {
    generator.stop();
    if (ratchet) await stopProcess(ratchet);
    await receiver.stop();
    await openai.close();
    await anthropic.close();
    rmSync(work, { recursive: true, force: true });
  }
}

/** What the bench reads of an effect. */
interface Effect {
  type: string;
  data: { name: string; state: string };
}

/** What the checks read of `GET /operations/{name}`. */
interface OperationRecord {
  state: string | null;
  providerState: string | null;
  version: number;
  resultPending?: true;
  result: {
    requestCounts?: { total?: number; succeeded?: number; failed?: number };
    usage?: { totalTokens?: number };
  } | null;
}
