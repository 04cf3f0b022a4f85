/**
 * Every provider's jobs at once through npm start, the disease Ratchet cures:
 * OpenAI's five kinds ended by shuffled, duplicated webhooks (carrying only
 * the job's id) while polls still answer older states, then the outcome the
 * polls bring; Anthropic's batches ending in each of `ended`'s outcomes;
 * Bedrock's batch jobs followed by polls alone (off AWS). Every effect once,
 * in version order, carrying its provider; a job's last effect carries its
 * outcome.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../support/deliveries.ts';
import { anthropicBatch, type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { bedrockJob, type FakeBedrock, startFakeBedrock } from '../support/fake-bedrock.ts';
import {
  type FakeOpenAI,
  type OpenAIJobKind,
  openaiBatch,
  openaiDelivery,
  openaiEvalRun,
  openaiFineTuningJob,
  openaiResponse,
  openaiVideo,
  startFakeOpenAI,
} from '../support/fake-openai.ts';
import { firstSweepDone, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';
import { shuffle } from '../support/shuffle.ts';

/** The storm's order, said on a failure so it replays. */
const SEED = Date.now() % 100_000;
const outboundSecret = newSecret();
const openaiSecret = newSecret();
let openai: FakeOpenAI;
let anthropic: FakeAnthropic;
let bedrock: FakeBedrock;
let receiver: Receiver;
let ratchet: RatchetProcess;

beforeAll(async () => {
  [openai, anthropic, bedrock] = await Promise.all([startFakeOpenAI(), startFakeAnthropic(), startFakeBedrock()]);
  receiver = await new Receiver(outboundSecret).start();
  ratchet = await startRatchet({
    DATA_DIR: ':memory:',
    WEBHOOK_SIGNING_SECRETS: newSecret(),
    OPENAI_API_KEY: 'sk-storm',
    OPENAI_BASE_URL: openai.url,
    OPENAI_WEBHOOK_SECRET: openaiSecret,
    ANTHROPIC_API_KEY: 'sk-ant-storm',
    ANTHROPIC_BASE_URL: anthropic.url,
    AWS_REGION: 'us-east-1',
    AWS_ENDPOINT_URL_BEDROCK: bedrock.url,
    AWS_ACCESS_KEY_ID: 'AKIDSTORM',
    AWS_SECRET_ACCESS_KEY: 'storm-secret',
    RECONCILE_INTERVAL_SECONDS: '0.3',
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outboundSecret,
    // Its sweeps adopt nothing here: INFO logs them.
    POWERTOOLS_LOG_LEVEL: 'INFO',
  });
  // Every job below is tracked (201): discovery's first sweep, listing as Ratchet starts, must not adopt one first.
  await firstSweepDone(ratchet, ['openai', 'anthropic']);
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  await Promise.all([openai?.close(), anthropic?.close(), bedrock?.close()]);
});

interface Job {
  name: string;
  /** The state and outcome Ratchet must end with. */
  state: string;
  result: Record<string, unknown>;
}

const post = (path: string, body: unknown) =>
  ratchet.api(path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
const record = async (name: string) =>
  (await (await ratchet.api(`/operations/${name}`)).json()) as { state: string | null; result: Record<string, unknown> | null };

/** One OpenAI kind: its fake's kind, the object while running and once ended, its webhook type and its name. */
const OPENAI_KINDS: Array<{
  fake: OpenAIJobKind;
  running: () => Record<string, unknown>;
  ended: (running: Record<string, unknown>) => Record<string, unknown>;
  type: string;
  state: string;
  name: (object: Record<string, unknown>) => string;
  outcome: (ended: Record<string, unknown>) => Record<string, unknown>;
}> = [
  {
    fake: 'batch',
    running: () => openaiBatch({ status: 'in_progress' }),
    ended: (o) => openaiBatch({ id: o.id as string, status: 'completed' }),
    type: 'batch.completed',
    state: 'SUCCEEDED',
    name: (o) => `openai/batches/${o.id}`,
    outcome: (o) => ({ requestCounts: { total: (o.request_counts as { total: number }).total }, outputFileId: o.output_file_id }),
  },
  {
    fake: 'response',
    running: () => openaiResponse({ status: 'in_progress', background: true }),
    ended: (o) => openaiResponse({ id: o.id as string, status: 'incomplete', incomplete_details: { reason: 'max_output_tokens' } }),
    type: 'response.incomplete',
    state: 'FAILED',
    name: (o) => `openai/responses/${o.id}`,
    outcome: () => ({ error: { code: 'max_output_tokens' } }),
  },
  {
    fake: 'video',
    running: () => openaiVideo({ status: 'in_progress' }),
    ended: (o) => openaiVideo({ id: o.id as string, status: 'completed' }),
    type: 'video.completed',
    state: 'SUCCEEDED',
    name: (o) => `openai/videos/${o.id}`,
    outcome: () => ({}),
  },
  {
    fake: 'fine-tuning',
    running: () => openaiFineTuningJob({ status: 'running' }),
    ended: (o) => openaiFineTuningJob({ id: o.id as string, status: 'succeeded' }),
    type: 'fine_tuning.job.succeeded',
    state: 'SUCCEEDED',
    name: (o) => `openai/fine_tuning/jobs/${o.id}`,
    outcome: (o) => ({ fineTunedModel: o.fine_tuned_model }),
  },
  {
    fake: 'eval-run',
    running: () => openaiEvalRun({ status: 'in_progress', eval_id: 'eval_storm' }),
    ended: (o) => openaiEvalRun({ id: o.id as string, eval_id: 'eval_storm', status: 'completed' }),
    type: 'eval.run.succeeded',
    state: 'SUCCEEDED',
    name: (o) => `openai/evals/eval_storm/runs/${o.id}`,
    outcome: () => ({}),
  },
];

type Counts = { processing: number; succeeded: number; errored: number; canceled: number; expired: number };
const ANTHROPIC_ENDS: Array<{ counts: Counts; state: string }> = [
  { counts: { processing: 0, succeeded: 3, errored: 1, canceled: 0, expired: 0 }, state: 'SUCCEEDED' },
  { counts: { processing: 0, succeeded: 0, errored: 0, canceled: 4, expired: 0 }, state: 'CANCELLED' },
  { counts: { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 2 }, state: 'EXPIRED' },
  { counts: { processing: 0, succeeded: 0, errored: 2, canceled: 1, expired: 1 }, state: 'FAILED' },
];

describe('every provider at once', () => {
  it('ends each job at its state with its outcome; every effect once, in version order, with its provider', async () => {
    const jobs: Job[] = [];
    const deliveries: Array<{ body: string; headers: Record<string, string> }> = [];
    const endings: Array<() => void> = [];
    // OpenAI: tracked (an eval run's event names the run alone: it applies to the tracked run), running at the
    // fake, each ended by a webhook delivered twice in a shuffled storm while the fake still answers "running".
    for (let round = 0; round < 3; round++) {
      for (const kind of OPENAI_KINDS) {
        const running = kind.running();
        openai.set(kind.fake, running);
        const name = kind.name(running);
        expect((await post('/operations', { name })).status).toBe(201);
        const ended = kind.ended(running);
        endings.push(() => openai.set(kind.fake, ended));
        jobs.push({ name, state: kind.state, result: kind.outcome(ended) });
        const delivery = openaiDelivery(openaiSecret, { type: kind.type, id: running.id as string });
        deliveries.push(delivery, delivery);
      }
    }
    // Anthropic: one batch per outcome of `ended`, polled only.
    for (const end of ANTHROPIC_ENDS) {
      const running = anthropicBatch({ processing_status: 'in_progress' });
      anthropic.set(running);
      const name = `anthropic/messages/batches/${running.id}`;
      expect((await post('/operations', { name })).status).toBe(201);
      endings.push(() =>
        anthropic.set(anthropicBatch({ id: running.id as string, processing_status: 'ended', request_counts: end.counts })),
      );
      const total = Object.values(end.counts).reduce((sum, n) => sum + n, 0);
      jobs.push({ name, state: end.state, result: { requestCounts: { total } } });
    }
    // Bedrock: polled off AWS, through the SDK, with the AWS chain (here the environment's keys).
    const job = bedrockJob({ status: 'InProgress' });
    bedrock.set(job);
    const jobId = (job.jobArn as string).split('/').at(-1) as string;
    const bedrockName = `bedrock/us-east-1/${(job.jobArn as string).split(':')[4]}/model-invocation-jobs/${jobId}`;
    expect((await post('/operations', { name: bedrockName })).status).toBe(201);
    endings.push(() => bedrock.set(bedrockJob({ jobArn: job.jobArn as string, status: 'Completed' })));
    jobs.push({ name: bedrockName, state: 'SUCCEEDED', result: {} });

    // The storm: every webhook (twice, shuffled) while the polls still answer older states...
    const answers = await Promise.all(
      shuffle(deliveries, SEED).map(async (delivery) => {
        const response = await fetch(`${ratchet.url}/webhooks/openai`, { method: 'POST', body: delivery.body, headers: delivery.headers });
        return response.status;
      }),
    );
    expect(answers.every((status) => status === 200)).toBe(true);
    // ...then the providers' answers catch up.
    for (const end of shuffle(endings, SEED + 1)) end();
    for (const expected of jobs)
      await eventually(
        async () => {
          const stored = await record(expected.name);
          return stored.state === expected.state && stored.result !== null && !('resultPending' in stored);
        },
        30_000,
        `${expected.name} ${expected.state} with its outcome (storm seed ${SEED})`,
      );
    for (const expected of jobs) expect(await record(expected.name)).toMatchObject({ state: expected.state, result: expected.result });

    // Effects: once each (by id), in version order per job, the last one carrying the outcome.
    await eventually(
      () =>
        jobs.every((expected) =>
          receiver.applied().some((d) => d.body.data.name === expected.name && (d.body.data as { result?: unknown }).result != null),
        ),
      30_000,
      `every outcome delivered (storm seed ${SEED})`,
    );
    const ids = receiver.applied().map((d) => d.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const expected of jobs) {
      const mine = receiver.applied().filter((d) => d.body.data.name === expected.name);
      const versions = mine.map((d) => (d.body.data as { version: number }).version);
      expect(versions).toEqual([...versions].sort((a, b) => a - b));
      expect(mine.every((d) => (d.body.data as { provider?: string }).provider === expected.name.split('/')[0])).toBe(true);
      expect(mine.at(-1)?.body.data).toMatchObject({ state: expected.state, result: expected.result });
      expect(mine.filter((d) => d.body.type === 'operation.state_changed' && d.body.data.state === expected.state)).toHaveLength(1);
    }
  });
});
