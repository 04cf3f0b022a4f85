/**
 * `ratchet/openai` end to end: the real `openai` SDK against the fake OpenAI
 * on 127.0.0.1 and a real Ratchet (the local runtime, as `ratchet start` runs
 * it), its creates wrapped by `trackJobs`. Each job is known to Ratchet, with
 * its metadata and its key's label, the moment its create returns: a batch, a
 * background response, a video and a remix, a fine-tuning job, an eval run,
 * and on Azure a batch under its resource. A foreground or streamed response
 * is no job; a tracking failure never hides the job created.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AzureOpenAI, OpenAI } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { RatchetClient } from '../../sdk/client.ts';
import { trackJobs } from '../../sdk/openai.ts';
import { type FakeOpenAI, startFakeOpenAI } from '../support/fake-openai.ts';
import { eventually } from '../support/receiver.ts';

const KEYS = 'team-a=sk-team-a,team-b=sk-team-b';
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-openai-client-'));
let fake: FakeOpenAI;
let runtime: LocalRuntime;
let ratchet: RatchetClient;

beforeAll(async () => {
  fake = await startFakeOpenAI();
  runtime = await startLocalRuntime(loadConfig({ DATA_DIR: dataDir, PORT: '0', OPENAI_API_KEYS: KEYS, OPENAI_BASE_URL: fake.url }));
  ratchet = new RatchetClient({ url: runtime.url, token: runtime.apiToken });
  // The first reconcile run lists each key's batches (discovery): once it has, a batch created here is this test's to track.
  const listed = (key: string) => fake.requests.some((r) => r.method === 'GET' && r.path === '/v1/batches' && r.apiKey === key);
  await eventually(() => listed('sk-team-a') && listed('sk-team-b'), 20_000, 'the first discovery sweep');
});
afterAll(async () => {
  await runtime?.stop();
  await fake?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const sdk = (apiKey = 'sk-team-a') => new OpenAI({ apiKey, baseURL: fake.url, maxRetries: 0 });
const batchRequest = { input_file_id: 'file-abc', endpoint: '/v1/responses', completion_window: '24h' } as const;

describe('trackJobs on the OpenAI SDK', () => {
  it('tracks a batch before create returns, with its metadata and the label of the client’s key; the answer is the SDK’s own', async () => {
    const openai = trackJobs(sdk('sk-team-b'), ratchet, { keys: KEYS });
    const batch = await openai.batches.create({ ...batchRequest, metadata: { order: 'A-17' } });
    expect(batch.id).toMatch(/^batch_/);
    expect(await ratchet.get(`openai/batches/${batch.id}`)).toMatchObject({
      kind: 'openai-batch',
      userMetadata: { order: 'A-17' },
      credential: 'team-b',
    });
    // Still the SDK's APIPromise: the request id, and withResponse() (which tracks the job it parses).
    expect(batch._request_id).toMatch(/^req_/);
    const { data, response } = await openai.batches.create(batchRequest).withResponse();
    expect(response.status).toBe(200);
    expect(await ratchet.get(`openai/batches/${data.id}`)).toMatchObject({ kind: 'openai-batch', credential: 'team-b' });
  });

  it('tracks a background response; a foreground or a streamed one is no job', async () => {
    const openai = trackJobs(sdk(), ratchet, { credential: 'team-a' });
    const background = await openai.responses.create({ model: 'gpt-5', input: 'research', background: true, metadata: { ticket: '7' } });
    expect(await ratchet.get(`openai/responses/${background.id}`)).toMatchObject({
      kind: 'openai-response',
      userMetadata: { ticket: '7' },
      credential: 'team-a',
    });
    const before = fake.requests.length;
    const foreground = await openai.responses.create({ model: 'gpt-5', input: 'hi' });
    expect(foreground.status).toBe('completed');
    expect(await ratchet.get(`openai/responses/${foreground.id}`)).toBeUndefined();
    // A streamed one is passed through untouched: the stream itself is returned (the fake streams nothing; closed unread).
    const stream = await openai.responses.create({ model: 'gpt-5', input: 'hi', background: true, stream: true });
    stream.controller.abort();
    expect(fake.requests.length).toBe(before + 2);
    expect((await ratchet.list({ kind: 'openai-response' })).operations.map((o) => o.name)).toEqual([`openai/responses/${background.id}`]);
  });

  it('tracks a video and its remix, a fine-tuning job and an eval run by their names, with their metadata', async () => {
    // The fake has no remix route: a remix (a new video made from another) is answered by its video create.
    const remixing: typeof fetch = (input, init) => {
      const url = String(input instanceof Request ? input.url : input);
      return fetch(url.replace(/\/videos\/[^/]+\/remix$/, '/videos'), init);
    };
    const openai = trackJobs(new OpenAI({ apiKey: 'sk-team-a', baseURL: fake.url, maxRetries: 0, fetch: remixing }), ratchet);
    const video = await openai.videos.create({ model: 'sora-2', prompt: 'a lighthouse at dusk' });
    const remix = await openai.videos.remix(video.id, { prompt: 'at dawn' });
    const job = await openai.fineTuning.jobs.create({ model: 'gpt-4.1-mini', training_file: 'file-train', metadata: { team: 'search' } });
    const run = await openai.evals.runs.create('eval_42', {
      data_source: { type: 'jsonl', source: { type: 'file_id', id: 'file-eval' } },
      metadata: { suite: 'nightly' },
    });
    expect(await ratchet.get(`openai/videos/${video.id}`)).toMatchObject({ kind: 'openai-video' });
    expect(await ratchet.get(`openai/videos/${remix.id}`)).toMatchObject({ kind: 'openai-video' });
    expect(await ratchet.get(`openai/fine_tuning/jobs/${job.id}`)).toMatchObject({
      kind: 'openai-fine-tuning',
      userMetadata: { team: 'search' },
    });
    expect(await ratchet.get(`openai/evals/eval_42/runs/${run.id}`)).toMatchObject({
      kind: 'openai-eval-run',
      userMetadata: { suite: 'nightly' },
    });
  });

  it('on Azure, tracks a batch under its resource and nothing else', async () => {
    const endpoint = 'https://ratchet-test.openai.azure.com';
    // The client talks to its Azure endpoint (with an Entra ID token: a bearer, as the fake wants); its requests reach the fake.
    const toFake: typeof fetch = (input, init) =>
      fetch(String(input instanceof Request ? input.url : input).replace(`${endpoint}/openai`, fake.url), init);
    const azure = trackJobs(
      new AzureOpenAI({
        endpoint,
        azureADTokenProvider: async () => 'entra-token',
        apiVersion: '2025-04-01-preview',
        fetch: toFake,
        maxRetries: 0,
      }),
      ratchet,
    );
    const batch = await azure.batches.create({ ...batchRequest, metadata: { order: 'Z-1' } });
    expect(await ratchet.get(`azure-openai/ratchet-test/batches/${batch.id}`)).toMatchObject({
      kind: 'azure-openai-batch',
      userMetadata: { order: 'Z-1' },
    });
    expect(await ratchet.get(`openai/batches/${batch.id}`)).toBeUndefined();
    const response = await azure.responses.create({ model: 'gpt-5', input: 'research', background: true });
    expect(await ratchet.get(`openai/responses/${response.id}`)).toBeUndefined();
  });

  it('tracks nothing on an Azure client whose resource it cannot name, and says so', async () => {
    const warnings: string[] = [];
    const azure = trackJobs(
      new AzureOpenAI({
        baseURL: fake.url,
        azureADTokenProvider: async () => 'entra-token',
        apiVersion: '2025-04-01-preview',
        maxRetries: 0,
      }),
      ratchet,
      { logger: { warn: (message: string) => warnings.push(message) } },
    );
    const batch = await azure.batches.create(batchRequest);
    expect(await ratchet.get(`openai/batches/${batch.id}`)).toBeUndefined();
    expect(warnings).toEqual([expect.stringContaining(`trackJobs tracks nothing on ${fake.url}`)]);
  });

  it('returns a job whose tracking failed (Ratchet unreachable), and reports it', async () => {
    const failures: Array<{ name: string; message: string }> = [];
    const warnings: string[] = [];
    const offline = new RatchetClient({ url: 'http://127.0.0.1:9', retries: 0 });
    const openai = trackJobs(sdk(), offline, {
      onTrackError: (error, name) => failures.push({ name, message: error.message }),
      logger: { warn: (message: string) => warnings.push(message) },
    });
    const batch = await openai.batches.create(batchRequest);
    expect(fake.get('batch', batch.id)).toMatchObject({ status: 'validating' });
    expect(failures).toEqual([{ name: `openai/batches/${batch.id}`, message: expect.stringMatching(/127\.0\.0\.1/) }]);
    expect(warnings).toEqual([expect.stringContaining(`openai/batches/${batch.id} was created but could not be tracked`)]);
  });
});
