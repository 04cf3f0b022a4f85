/**
 * The whole system through npm start: operations tracked over HTTP (a batch,
 * a Veo operation and an interaction), learned only by polling a fake Gemini
 * (real SDK, GEMINI_BASE_URL), and every state change delivered by the effects
 * path to a receiver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RatchetClient, RatchetError } from '../../sdk/client.ts';
import { newSecret } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const outboundSecret = newSecret();
let gemini: FakeGemini;
let receiver: Receiver;
let ratchet: RatchetProcess;

beforeAll(async () => {
  gemini = await new FakeGemini('e2e-key').start();
  receiver = await new Receiver(outboundSecret).start();
  ratchet = await startRatchet({
    DATA_DIR: ':memory:',
    WEBHOOK_SIGNING_SECRETS: newSecret(),
    GEMINI_API_KEY: 'e2e-key',
    GEMINI_BASE_URL: gemini.baseUrl,
    RECONCILE_INTERVAL_SECONDS: '0.3',
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outboundSecret,
    // The Agent Platform, with an express-mode key, through the same fake.
    GOOGLE_CLOUD_PROJECT: 'e2e-project',
    GOOGLE_CLOUD_LOCATION: 'us-central1',
    AGENT_PLATFORM_API_KEY: gemini.platformApiKey,
    AGENT_PLATFORM_BASE_URL: gemini.baseUrl,
  });
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  await gemini?.stop();
});

const stateOf = async (name: string) => ((await (await ratchet.api(`/operations/${name}`)).json()) as { state: string | null }).state;

describe('npm start with reconcile', () => {
  it('follows tracked operations by polling alone and fires each state change once, in order', async () => {
    const batch = 'batches/e2e-poll';
    const video = 'models/veo-3.0-generate-001/operations/e2e-poll';
    const interaction = 'interactions/e2e-poll';
    for (const name of ['batch_e2e-poll', video, 'interaction_e2e-poll']) {
      const response = await ratchet.api(`/operations`, {
        method: 'POST',
        body: JSON.stringify({ name }),
        headers: { 'content-type': 'application/json' },
      });
      expect(response.status).toBe(201);
    }
    gemini.batches.set(batch, { state: 'BATCH_STATE_PENDING', updateTime: '2026-11-30T10:00:00Z' });
    gemini.operations.set(video, { done: false });
    gemini.interactions.set(interaction, { status: 'in_progress', updated: '2026-11-30T10:00:01Z' });
    await eventually(
      async () =>
        (await stateOf(batch)) === 'PENDING' && (await stateOf(video)) === 'RUNNING' && (await stateOf(interaction)) === 'RUNNING',
      45_000,
      'first polls',
    );
    gemini.batches.set(batch, { state: 'BATCH_STATE_RUNNING', updateTime: '2026-11-30T10:05:00.25Z' });
    await eventually(async () => (await stateOf(batch)) === 'RUNNING', 45_000, 'RUNNING');
    gemini.batches.set(batch, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T10:09:00Z' });
    gemini.operations.set(video, {
      done: true,
      response: { generateVideoResponse: { generatedSamples: [{ video: { uri: 'https://v/e2e.mp4' } }] } },
    });
    gemini.interactions.set(interaction, { status: 'completed', updated: '2026-11-30T10:09:02Z' });
    await eventually(
      async () =>
        (await stateOf(batch)) === 'SUCCEEDED' && (await stateOf(video)) === 'SUCCEEDED' && (await stateOf(interaction)) === 'SUCCEEDED',
      45_000,
      'SUCCEEDED',
    );

    await eventually(() => receiver.applied().length >= 7, 20_000, 'effects');
    const sent = receiver.applied().map((d) => `${d.body.data.name} ${d.body.data.previousState ?? '-'}>${d.body.data.state}`);
    expect(sent.filter((s) => s.startsWith(batch))).toEqual([
      `${batch} ->PENDING`,
      `${batch} PENDING>RUNNING`,
      `${batch} RUNNING>SUCCEEDED`,
    ]);
    expect(sent.filter((s) => s.startsWith(video))).toEqual([`${video} ->RUNNING`, `${video} RUNNING>SUCCEEDED`]);
    expect(sent.filter((s) => s.startsWith(interaction))).toEqual([`${interaction} ->RUNNING`, `${interaction} RUNNING>SUCCEEDED`]);
    expect(receiver.accepted).toHaveLength(receiver.applied().length);
  }, 180_000);

  it('follows an Agent Platform batch prediction job, polled only, to its end, with its effects', async () => {
    const job = 'projects/e2e-project/locations/us-central1/batchPredictionJobs/4242';
    const tracked = await ratchet.api('/operations', {
      method: 'POST',
      body: JSON.stringify({ name: job }),
      headers: { 'content-type': 'application/json' },
    });
    expect(tracked.status).toBe(201);
    gemini.batches.set(job, { state: 'JOB_STATE_PAUSED', updateTime: '2026-11-30T11:00:00Z' });
    await eventually(async () => (await stateOf(job)) === 'RUNNING', 45_000, 'RUNNING');
    gemini.batches.set(job, { state: 'JOB_STATE_SUCCEEDED', updateTime: '2026-11-30T11:30:00Z' });
    await eventually(async () => (await stateOf(job)) === 'SUCCEEDED', 45_000, 'SUCCEEDED');
    await eventually(() => receiver.applied().filter((d) => d.body.data.name === job).length >= 2, 20_000, 'effects');
    expect(receiver.applied().flatMap((d) => (d.body.data.name === job ? [`${d.body.data.kind} ${d.body.data.state}`] : []))).toEqual([
      'platform-batch RUNNING',
      'platform-batch SUCCEEDED',
    ]);
  }, 120_000);

  it('follows an Agent Platform tuning job, polled only, to its end: its effects carry the tuned model', async () => {
    const job = 'projects/e2e-project/locations/us-central1/tuningJobs/77';
    const client = new RatchetClient({ url: ratchet.url, token: ratchet.apiToken });
    expect((await client.track(job)).operation).toMatchObject({ kind: 'platform-tuning', state: null });
    gemini.tuningJobs.set(job, { state: 'JOB_STATE_RUNNING', updateTime: '2026-11-30T11:00:00Z' });
    await eventually(async () => (await stateOf(job)) === 'RUNNING', 45_000, 'RUNNING');
    const tunedModel = { model: 'projects/e2e-project/locations/us-central1/models/tuned-77' };
    gemini.tuningJobs.set(job, { state: 'JOB_STATE_SUCCEEDED', updateTime: '2026-11-30T12:00:00Z', tunedModel });
    expect(await client.waitFor(job, { timeoutMs: 45_000 })).toMatchObject({ state: 'SUCCEEDED', result: { tunedModel } });
    await eventually(() => receiver.applied().filter((d) => d.body.data.name === job).length >= 2, 20_000, 'effects');
    const effects = receiver.applied().filter((d) => d.body.data.name === job);
    expect(effects.map((d) => `${d.body.data.kind} ${d.body.data.state}`)).toEqual([
      'platform-tuning RUNNING',
      'platform-tuning SUCCEEDED',
    ]);
    expect(effects.map((d) => (d.body.data as { result?: unknown }).result)).toEqual([null, { tunedModel }]);
  }, 120_000);

  it('rejects waitFor with not-found as soon as polling stops on a job Gemini no longer knows, its state left as it was', async () => {
    const name = 'batches/e2e-gone';
    const client = new RatchetClient({ url: ratchet.url, token: ratchet.apiToken });
    await client.track(name);
    const started = Date.now();
    const error = await client.waitFor(name, { timeoutMs: 60_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RatchetError);
    expect(error).toMatchObject({ code: 'not-found', operation: { state: null, polling: { nextPollAt: null, note: 'not-found' } } });
    expect((error as Error).message).toContain('Gemini no longer knows it');
    // Three 404s a poll interval (0.3 s) apart, then at once: the long poll is woken when polling stops.
    expect(Date.now() - started).toBeLessThan(10_000);
  }, 60_000);
});
