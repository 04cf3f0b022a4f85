/**
 * `ratchet/genai` and the discovery sweep, end to end: the real @google/genai
 * SDK against the fake Gemini on 127.0.0.1, jobs created through
 * `trackJobs` and tracked before the create returns, followed to their end by
 * the local runtime's reconcile; a batch whose tracking failed adopted by the
 * first discovery sweep; and the sweep's paging bound against the fake's
 * misbehaving list, through the same SDK.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GoogleGenAI } from '@google/genai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { BatchDiscovery } from '../../app/reconcile/discovery.ts';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { geminiBatches } from '../../providers/gemini/events.ts';
import { GenAiPoller } from '../../providers/gemini/poller.ts';
import { RatchetClient, RatchetError } from '../../sdk/client.ts';
import { trackJobs } from '../../sdk/genai.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { silentLogger } from '../support/silent-logger.ts';

const KEY = 'genai-test-key';
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-genai-'));
let gemini: FakeGemini;
let runtime: LocalRuntime;
let client: RatchetClient;
let untracked: string;
const failures: Array<{ name: string; message: string }> = [];
const warnings: string[] = [];

const sdk = () => new GoogleGenAI({ apiKey: KEY, httpOptions: { baseUrl: gemini.baseUrl } });
/** The SDK in Agent Platform mode (an express-mode key), in the fake's project and location. */
const platformSdk = () =>
  new GoogleGenAI({
    vertexai: true,
    project: 'genai-project',
    location: 'us-central1',
    apiKey: gemini.platformApiKey,
    httpOptions: { baseUrl: gemini.baseUrl },
  });
const inlineBatch = { inlinedRequests: [{ contents: [{ parts: [{ text: 'hello' }], role: 'user' }] }] };

beforeAll(async () => {
  gemini = await new FakeGemini(KEY).start();
  // A script whose tracking fails (Ratchet not up yet): the batch is created and returned all the same.
  const offline = new RatchetClient({ url: 'http://127.0.0.1:9', retries: 0 });
  const ai = trackJobs(sdk(), offline, {
    onTrackError: (error, name) => failures.push({ name, message: error.message }),
    logger: { warn: (message: string) => warnings.push(message) },
  });
  untracked = (await ai.batches.create({ model: 'gemini-2.5-flash', src: inlineBatch })).name as string;

  runtime = await startLocalRuntime(
    loadConfig({ DATA_DIR: dataDir, PORT: '0', GEMINI_API_KEY: KEY, GEMINI_BASE_URL: gemini.baseUrl, RECONCILE_INTERVAL_SECONDS: '1' }),
  );
  client = new RatchetClient({ url: runtime.url, token: runtime.apiToken });
});

afterAll(async () => {
  await runtime?.stop();
  await gemini?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('trackJobs', () => {
  it('tracks a batch before create returns, with its webhook metadata, and waitFor sees it end', async () => {
    const ai = trackJobs(sdk(), client);
    const job = await ai.batches.create({
      model: 'gemini-2.5-flash',
      src: inlineBatch,
      config: { displayName: 'nightly', webhookConfig: { userMetadata: { order: 'A-17' } } },
    });
    expect(job.name).toMatch(/^batches\//);
    expect(gemini.created.get(job.name as string)).toBeDefined();
    // Known to Ratchet the moment create returned.
    expect(await client.get(job.name as string)).toMatchObject({ kind: 'batch', userMetadata: { order: 'A-17' } });

    gemini.batches.set(job.name as string, { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
    expect(await client.waitFor(job.name as string, { timeoutMs: 20_000 })).toMatchObject({
      state: 'SUCCEEDED',
      userMetadata: { order: 'A-17' },
    });
  });

  it('tracks an embeddings batch, an Omni video and a background interaction; a foreground interaction is not a job', async () => {
    const ai = trackJobs(sdk(), client);
    const embeddings = await ai.batches.createEmbeddings({
      model: 'gemini-embedding-001',
      src: { inlinedRequests: { contents: [{ parts: [{ text: 'lighthouse' }] }] } },
    });
    expect(await client.get(embeddings.name as string)).toMatchObject({ kind: 'batch', state: null });

    // Video on the Gemini API today: a background interaction of an Omni model, its video delivered by URI.
    const omni = await ai.interactions.create({
      model: 'gemini-omni-video-preview',
      input: 'a lighthouse at dusk',
      background: true,
      response_format: { type: 'video', delivery: 'uri' },
    } as never);
    expect(await client.get(`interactions/${omni.id}`)).toMatchObject({ kind: 'interaction', state: null });
    // Veo is the Agent Platform's: SDK 3.x refuses generateVideos on the Gemini API before any request, and nothing is tracked.
    const before = gemini.requests.length;
    await expect(ai.models.generateVideos({ model: 'veo-3.0-generate-001', prompt: 'a lighthouse at dusk' })).rejects.toThrow(
      /only supported by the Gemini Enterprise Agent Platform/,
    );
    expect(gemini.requests.length).toBe(before);

    const background = await ai.interactions.create({
      model: 'gemini-2.5-flash',
      input: 'summarize',
      background: true,
      webhook_config: { user_metadata: { ticket: 7 } },
    });
    expect(await client.get(`interactions/${background.id}`)).toMatchObject({ kind: 'interaction', userMetadata: { ticket: 7 } });

    const foreground = await ai.interactions.create({ model: 'gemini-2.5-flash', input: 'hi' });
    expect(await client.get(`interactions/${foreground.id}`)).toBeUndefined();
  });

  it('in Agent Platform mode, tracks a Veo generation and an interaction by their names in the project and location', async () => {
    const platform = platformSdk();
    const ai = trackJobs(platform, client);
    const video = await ai.models.generateVideos({ model: 'veo-3.1-generate-001', prompt: 'a lighthouse at dusk' });
    expect(video.name).toMatch(
      /^projects\/genai-project\/locations\/us-central1\/publishers\/google\/models\/veo-3.1-generate-001\/operations\//,
    );
    expect(await client.get(video.name as string)).toMatchObject({ kind: 'platform-video', state: null });
    const interaction = await ai.interactions.create({ model: 'gemini-2.5-flash', input: 'research', background: true });
    expect(await client.get(`projects/genai-project/locations/us-central1/interactions/${interaction.id}`)).toMatchObject({
      kind: 'platform-interaction',
    });
  });

  it('tracks File Search imports and uploads (SDK 3.6) before they return, and follows each to its end', async () => {
    const ai = trackJobs(sdk(), client);
    const imported = await ai.fileSearchStores.importFile({ fileSearchStoreName: 'fileSearchStores/handbook', fileName: 'files/abc' });
    expect(imported.name).toMatch(/^fileSearchStores\/handbook\/operations\//);
    expect(await client.get(imported.name as string)).toMatchObject({ kind: 'file-search', state: null });
    const uploaded = await ai.fileSearchStores.uploadToFileSearchStore({
      fileSearchStoreName: 'fileSearchStores/handbook',
      file: new Blob(['the handbook'], { type: 'text/plain' }),
    });
    expect(uploaded.name).toMatch(/^fileSearchStores\/handbook\/upload\/operations\//);
    expect(await client.get(uploaded.name as string)).toMatchObject({ kind: 'file-search', state: null });
    const response = { documentName: 'fileSearchStores/handbook/documents/doc-1' };
    gemini.operations.set(imported.name as string, { done: true, response });
    gemini.operations.set(uploaded.name as string, { done: true, error: { code: 3, message: 'empty file' } });
    expect(await client.waitFor(imported.name as string, { timeoutMs: 20_000 })).toMatchObject({
      state: 'SUCCEEDED',
      result: { response },
    });
    expect(await client.waitFor(uploaded.name as string, { timeoutMs: 20_000 })).toMatchObject({
      state: 'FAILED',
      result: { error: { message: 'empty file' } },
    });
  });

  it('in Agent Platform mode, tracks a tuning job (tunings.tune) by its name', async () => {
    const platform = platformSdk();
    const job = await trackJobs(platform, client).tunings.tune({
      baseModel: 'gemini-2.5-flash',
      trainingDataset: { gcsUri: 'gs://ratchet-tests/train.jsonl' },
    });
    expect(job.name).toMatch(/^projects\/genai-project\/locations\/us-central1\/tuningJobs\//);
    expect(await client.get(job.name as string)).toMatchObject({ kind: 'platform-tuning', state: null });
  });

  it('returns a job whose tracking failed, reports it, and discovery adopts the batch and follows it to its end', async () => {
    expect(untracked).toMatch(/^batches\//);
    expect(failures).toEqual([{ name: untracked, message: expect.stringMatching(/127\.0\.0\.1/) }]);
    expect(warnings).toEqual([expect.stringContaining(`${untracked} was created but could not be tracked`)]);
    // The runtime's first reconcile run swept Gemini's batch list.
    await expect.poll(() => client.get(untracked), { timeout: 10_000 }).toMatchObject({ state: 'PENDING', source: 'poll' });
    gemini.batches.set(untracked, { state: 'BATCH_STATE_FAILED', updateTime: new Date().toISOString() });
    expect(await client.waitFor(untracked, { timeoutMs: 20_000 })).toMatchObject({ state: 'FAILED' });
    await expect(client.waitFor(untracked, { until: 'SUCCEEDED' })).rejects.toBeInstanceOf(RatchetError);
  });
});

describe('the discovery sweep through the SDK', () => {
  it('stops on a next-page token that repeats or is empty, where the SDK’s own pager would loop', async () => {
    const fake = await new FakeGemini(KEY).start();
    try {
      for (let i = 0; i < 6; i++)
        fake.batches.set(`batches/paged-${i}`, { state: 'BATCH_STATE_RUNNING', createTime: new Date().toISOString() });
      fake.listPageSize = 2;
      const sweep = (store = new MemoryStore()) =>
        new BatchDiscovery({
          lister: geminiBatches(new GenAiPoller({ gemini: { apiKey: KEY, baseUrl: fake.baseUrl } })),
          store,
          logger: silentLogger,
          pageSize: 2,
        }).sweepIfDue();
      expect(await sweep()).toEqual({ adopted: 6, listed: 6, pages: 3 });
      fake.listFault = 'token-loop';
      expect(await sweep()).toMatchObject({ pages: 2, listed: 4 });
      fake.listFault = 'empty-token';
      expect(await sweep()).toMatchObject({ pages: 1, listed: 2 });
      expect(fake.requests.filter((path) => path === 'batches')).toHaveLength(6);
    } finally {
      await fake.stop();
    }
  });
});
