/**
 * Gemini as it is today, through the real @google/genai 3.x against the fake
 * on 127.0.0.1, into each engine's store through the same ingest as a webhook:
 * the Agent Platform's jobs (batch prediction jobs, Veo operations) polled
 * with Application Default Credentials, interactions' `errors[]` and
 * `requires_continuation`, the retries each client makes, the API version
 * asked for, and an answer that carries its video inline.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReconcileStats, reconcile } from '../../app/reconcile/reconcile.ts';
import { kindOfName } from '../../core/names.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import { GenAiPoller } from '../../providers/gemini/poller.ts';
import { ENGINES, type FullStore, type StoreUnderTest } from '../support/engines.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { silentLogger } from '../support/silent-logger.ts';

const PROJECT = 'ratchet-tests';
const LOCATION = 'us-central1';
const SCOPE = `projects/${PROJECT}/locations/${LOCATION}`;

let gemini: FakeGemini;
let poller: GenAiPoller;
let folder: string;
let savedAdc: string | undefined;
let now = new Date('2026-12-01T00:00:00Z');
let store: FullStore;
let run = 0;

beforeAll(async () => {
  gemini = await new FakeGemini().start();
  // Application Default Credentials as Google's docs set them up for workload identity federation: an external
  // account whose token exchange (here at the fake's /token) turns a subject token from a file into an access token.
  folder = mkdtempSync(join(tmpdir(), 'ratchet-adc-'));
  writeFileSync(join(folder, 'subject-token'), 'a-subject-token-from-another-cloud');
  writeFileSync(
    join(folder, 'credentials.json'),
    JSON.stringify({
      type: 'external_account',
      audience: '//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/ratchet/providers/tests',
      subject_token_type: 'urn:ietf:params:oauth:token-type:jwt',
      token_url: `${gemini.baseUrl}/token`,
      credential_source: { file: join(folder, 'subject-token') },
    }),
  );
  savedAdc = process.env.GOOGLE_APPLICATION_CREDENTIALS;
  process.env.GOOGLE_APPLICATION_CREDENTIALS = join(folder, 'credentials.json');
  poller = new GenAiPoller({
    gemini: { apiKey: gemini.apiKey, baseUrl: gemini.baseUrl },
    platform: { project: PROJECT, location: LOCATION, baseUrl: gemini.baseUrl },
    timeoutMs: 2_000,
  });
});
afterAll(async () => {
  if (savedAdc === undefined) delete process.env.GOOGLE_APPLICATION_CREDENTIALS;
  else process.env.GOOGLE_APPLICATION_CREDENTIALS = savedAdc;
  rmSync(folder, { recursive: true, force: true });
  await gemini.stop();
});

const reconcileOnce = (using = poller): Promise<ReconcileStats> => {
  now = new Date(now.getTime() + 3 * 3600_000);
  return reconcile({ store, poller: using, logger: silentLogger, clock: () => now, intervalSeconds: 60, budgetMs: 60_000 });
};
const track = (name: string) => store.write(trackedRecord(name, kindOfName(name), timeFromDate(now)), undefined);
const at = (minute: number) => `2026-11-30T10:${String(minute).padStart(2, '0')}:00Z`;
const polls = (name: string) => gemini.requests.filter((r) => r === name).length;

describe.each(ENGINES)('Gemini today, on $label', (engine) => {
  let subject: StoreUnderTest;
  beforeAll(async () => {
    subject = await engine.open('gemini-today');
    store = subject.store;
  });
  afterAll(() => subject.close());

  it('polls an Agent Platform batch prediction job through PAUSED, RUNNING and SUCCEEDED with Application Default Credentials', async () => {
    run++;
    const name = `${SCOPE}/batchPredictionJobs/${9000 + run}`;
    await track(name);
    const tokensBefore = gemini.tokenRequests;
    const seen: Array<[string | null | undefined, string | null | undefined]> = [];
    for (const [minute, state] of [
      [1, 'JOB_STATE_PENDING'],
      [2, 'JOB_STATE_PAUSED'],
      [3, 'JOB_STATE_RUNNING'],
      [4, 'JOB_STATE_SUCCEEDED'],
    ] as const) {
      gemini.batches.set(name, { state, updateTime: at(minute), createTime: at(0) });
      await reconcileOnce();
      const record = await store.get(name);
      seen.push([record?.state, record?.providerState]);
    }
    expect(seen).toEqual([
      ['PENDING', 'JOB_STATE_PENDING'],
      ['RUNNING', 'JOB_STATE_PAUSED'],
      ['RUNNING', 'JOB_STATE_RUNNING'],
      ['SUCCEEDED', 'JOB_STATE_SUCCEEDED'],
    ]);
    expect(await store.get(name)).toMatchObject({
      kind: 'platform-batch',
      version: 5,
      updateTime: '2026-11-30T10:04:00.000000000Z',
      result: { outputUri: expect.stringMatching(/^gs:\/\/ratchet-tests\/out\//) },
    });
    // Authenticated by the exchanged token (the fake answers 401 to anything else), fetched once and reused.
    expect(gemini.tokenRequests - tokensBefore).toBeLessThanOrEqual(1);
    expect(gemini.tokenRequests).toBeGreaterThanOrEqual(1);
    // Asked at the Agent Platform's API version, set by Ratchet.
    const versions = gemini.requests.flatMap((r, i) => (r === name ? [gemini.versions[i]] : []));
    expect(new Set(versions)).toEqual(new Set(['v1beta1']));
  });

  it('polls an Agent Platform Veo operation with :fetchPredictOperation until done, its video recorded', async () => {
    run++;
    const name = `${SCOPE}/publishers/google/models/veo-3.1-generate-001/operations/op-${run}`;
    const blocked = `${SCOPE}/publishers/google/models/veo-3.1-generate-001/operations/blocked-${run}`;
    await track(name);
    await track(blocked);
    gemini.operations.set(name, { done: false });
    gemini.operations.set(blocked, { done: false });
    await reconcileOnce();
    expect((await store.get(name))?.state).toBe('RUNNING');
    gemini.operations.set(name, {
      done: true,
      response: {
        '@type': 'type.googleapis.com/cloud.ai.large_models.vision.GenerateVideoResponse',
        videos: [{ gcsUri: `gs://ratchet-tests/veo/${run}.mp4`, mimeType: 'video/mp4' }],
      },
    });
    gemini.operations.set(blocked, { done: true, response: { raiMediaFilteredCount: 1, raiMediaFilteredReasons: ['unsafe'] } });
    await reconcileOnce();
    expect(await store.get(name)).toMatchObject({
      kind: 'platform-video',
      state: 'SUCCEEDED',
      providerState: 'DONE',
      result: { outputUri: `gs://ratchet-tests/veo/${run}.mp4` },
    });
    expect(await store.get(blocked)).toMatchObject({ state: 'FAILED', providerState: 'DONE_FILTERED' });
    expect(polls(name)).toBe(2);
  });

  it("never sends another project's name, and stops polling it", async () => {
    run++;
    const foreign = `projects/someone-else/locations/${LOCATION}/batchPredictionJobs/${run}`;
    const otherPlace = `projects/${PROJECT}/locations/europe-west4/interactions/i-${run}`;
    await track(foreign);
    await track(otherPlace);
    const stats = await reconcileOnce();
    expect(stats.refused).toBeGreaterThanOrEqual(2);
    expect(polls(foreign) + polls(otherPlace)).toBe(0);
    const [candidate] = (await store.claimDue('9999', 10_000)).filter((c) => c.record.name === foreign);
    expect(candidate).toBeUndefined();
    expect((await subject.store.describe(foreign))?.polling).toMatchObject({ nextPollAt: null, note: 'other-project' });
  });

  it('polls an Agent Platform interaction, and says why one is not configured: a backoff, not a stop', async () => {
    run++;
    const name = `${SCOPE}/interactions/v1_${run}`;
    await track(name);
    gemini.interactions.set(name, { status: 'completed', updated: at(5) });
    const geminiOnly = new GenAiPoller({ gemini: { apiKey: gemini.apiKey, baseUrl: gemini.baseUrl } });
    expect((await reconcileOnce(geminiOnly)).failed).toBeGreaterThanOrEqual(1);
    expect((await subject.store.describe(name))?.polling).toMatchObject({ note: expect.stringContaining('GOOGLE_CLOUD_PROJECT') });
    await reconcileOnce();
    expect(await store.get(name)).toMatchObject({ kind: 'platform-interaction', state: 'SUCCEEDED' });
  });

  it("reads a failed interaction's errors[], and never polls again one that stopped at requires_continuation", async () => {
    run++;
    const failed = `interactions/failed-${run}`;
    const stopped = `interactions/stopped-${run}`;
    await track(failed);
    await track(stopped);
    gemini.interactions.set(failed, {
      status: 'failed',
      updated: at(1),
      errors: [{ code: 'https://ai.google.dev/errors/quota', message: 'quota exhausted for the project' }],
    });
    gemini.interactions.set(stopped, { status: 'requires_continuation', updated: at(1) });
    await reconcileOnce();
    expect(await store.get(failed)).toMatchObject({
      state: 'FAILED',
      result: { error: { code: 'https://ai.google.dev/errors/quota', message: 'quota exhausted for the project' } },
    });
    expect(await store.get(stopped)).toMatchObject({
      state: 'FAILED',
      providerState: 'requires_continuation',
      result: { error: { status: 'REQUIRES_CONTINUATION' } },
    });
    for (let i = 0; i < 3; i++) await reconcileOnce();
    expect(polls(stopped)).toBe(1);
    // Asked at the Gemini API version Ratchet sets (SDK 3.x alone would ask /v1/).
    const versions = gemini.requests.flatMap((r, i) => (r === failed ? [gemini.versions[i]] : []));
    expect(versions).toEqual(['v1beta']);
  });

  it('tries a 429 from interactions.get no more often than one from batches.get', async () => {
    run++;
    const batch = `batches/busy-${run}`;
    const interaction = `interactions/busy-${run}`;
    await track(batch);
    await track(interaction);
    gemini.faults.set(batch, '429');
    gemini.faults.set(interaction, '429');
    const stats = await reconcileOnce();
    gemini.faults.delete(batch);
    gemini.faults.delete(interaction);
    expect(stats.failed).toBeGreaterThanOrEqual(2);
    expect(polls(batch)).toBe(2);
    expect(polls(interaction)).toBeLessThanOrEqual(polls(batch));
    expect((await subject.store.describe(interaction))?.polling.note).toContain('429');
  });

  it('reads a completed interaction that carries its video inline (20 MiB), keeping none of its bytes; a URI is recorded', async () => {
    run++;
    const inline = `interactions/omni-inline-${run}`;
    const byUri = `interactions/omni-uri-${run}`;
    await track(inline);
    await track(byUri);
    const video = Buffer.alloc(15 * 1024 * 1024, 7).toString('base64'); // 15 MiB of video, 20 MiB as base64
    gemini.interactions.set(inline, {
      status: 'completed',
      updated: at(2),
      steps: [{ type: 'model_output', content: [{ type: 'video', mime_type: 'video/mp4', data: video }] }],
    });
    gemini.interactions.set(byUri, {
      status: 'completed',
      updated: at(2),
      steps: [{ type: 'model_output', content: [{ type: 'video', mime_type: 'video/mp4', uri: `files/clip-${run}` }] }],
    });
    await reconcileOnce();
    const record = await store.get(inline);
    expect(record).toMatchObject({ state: 'SUCCEEDED', result: null });
    expect(JSON.stringify(record).length).toBeLessThan(2_000);
    expect(await store.get(byUri)).toMatchObject({ state: 'SUCCEEDED', result: { outputUri: `files/clip-${run}` } });
    // Past the poller's limit, the answer is refused before it is parsed, with what to do about it.
    const small = new GenAiPoller({ gemini: { apiKey: gemini.apiKey, baseUrl: gemini.baseUrl }, maxAnswerBytes: 1024 * 1024 });
    const big = `interactions/omni-big-${run}`;
    await track(big);
    gemini.interactions.set(big, (gemini.interactions.get(inline) as never) ?? { status: 'completed' });
    await expect(small.poll({ name: big, kind: 'interaction' })).rejects.toThrow(/larger than 1 MiB.*delivery "uri"/);
  });
});
