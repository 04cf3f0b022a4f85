/**
 * Each provider's poller (providers/<provider>/poller.ts) through its real SDK against a fake server on 127.0.0.1
 * (test/support/fake-*.ts; Azure OpenAI's own small stand-in here): every kind polled by its name, with the key its
 * credential names; a name refused unsent; 404 as not-found; a state word to come as unknown-state; a refused key
 * noted by its label, never the key; a 429 holding that key alone back for as long as the provider asked, with no
 * request while it lasts; each key paced on its own; discovery's listing.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { AnthropicPoller } from '../../providers/anthropic/poller.ts';
import { BedrockPoller } from '../../providers/bedrock/poller.ts';
import { AzureOpenAIPoller, OpenAIPoller } from '../../providers/openai/poller.ts';
import type { PollFailedError } from '../../providers/port.ts';
import { anthropicBatch, type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { bedrockJob, type FakeBedrock, startFakeBedrock } from '../support/fake-bedrock.ts';
import { answer, type Listening, listen } from '../support/fake-http.ts';
import {
  type FakeOpenAI,
  openaiBatch,
  openaiEvalRun,
  openaiFineTuningJob,
  openaiResponse,
  openaiVideo,
  startFakeOpenAI,
} from '../support/fake-openai.ts';

/** Where a poller notes each key's answers. */
function keyHealth() {
  const notes: Array<[string, string, number?]> = [];
  return {
    notes,
    accepted: (label: string) => notes.push(['accepted', label]),
    refused: (label: string, status: number) => notes.push(['refused', label, status]),
  };
}

/** A clock that moves when the test says (from now). */
function movableClock() {
  const clock = { offset: 0, now: () => Date.now() + clock.offset };
  return clock;
}

async function rejectionOf(promise: Promise<unknown>): Promise<PollFailedError> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (error: PollFailedError) => error,
  );
}

const KEYS = [
  { label: 'team-a', apiKey: 'sk-a-0123456789' },
  { label: 'team-b', apiKey: 'sk-b-0123456789' },
];

describe('OpenAIPoller, through the openai SDK', () => {
  let fake: FakeOpenAI;
  beforeAll(async () => {
    fake = await startFakeOpenAI();
  });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.requests.length = 0;
    fake.latencyMs = 0;
  });

  const poller = (more: Partial<ConstructorParameters<typeof OpenAIPoller>[0]> = {}) =>
    new OpenAIPoller({ keys: KEYS, baseUrl: fake.url, requestsPerSecond: 1_000, ...more });

  it('polls every kind by its name, each answer mapped with its outcome, with the key its credential names', async () => {
    const batch = openaiBatch({ status: 'completed' });
    const response = openaiResponse({ status: 'incomplete' });
    const video = openaiVideo({ status: 'in_progress' });
    const job = openaiFineTuningJob({ status: 'succeeded' });
    const run = openaiEvalRun({ status: 'completed' });
    fake.set('batch', batch);
    fake.set('response', response);
    fake.set('video', video);
    fake.set('fine-tuning', job);
    fake.set('eval-run', run);
    const p = poller();

    expect(await p.poll({ name: `openai/batches/${batch.id}`, kind: 'openai-batch', credential: 'team-b' })).toEqual({
      kind: 'event',
      event: expect.objectContaining({
        name: `openai/batches/${batch.id}`,
        kind: 'openai-batch',
        state: 'SUCCEEDED',
        providerState: 'completed',
        source: 'poll',
        updateTime: new Date((batch.completed_at as number) * 1000).toISOString().replace('Z', '000000Z'),
        result: expect.objectContaining({
          requestCounts: { total: 100, succeeded: 98, failed: 2 },
          outputFileId: batch.output_file_id,
          errorFileId: batch.error_file_id,
        }),
      }),
    });
    expect(await p.poll({ name: `openai/responses/${response.id}`, kind: 'openai-response' })).toMatchObject({
      event: { state: 'FAILED', providerState: 'incomplete', result: { error: { code: 'max_output_tokens' }, usage: { totalTokens: 17 } } },
    });
    const polledVideo = await p.poll({ name: `openai/videos/${video.id}`, kind: 'openai-video' });
    expect(polledVideo).toMatchObject({ event: { state: 'RUNNING', providerState: 'in_progress' } });
    expect(polledVideo.kind === 'event' && 'result' in polledVideo.event).toBe(false);
    expect(await p.poll({ name: `openai/fine_tuning/jobs/${job.id}`, kind: 'openai-fine-tuning' })).toMatchObject({
      event: { state: 'SUCCEEDED', result: { fineTunedModel: job.fine_tuned_model } },
    });
    expect(await p.poll({ name: `openai/evals/${run.eval_id}/runs/${run.id}`, kind: 'openai-eval-run' })).toMatchObject({
      event: { state: 'SUCCEEDED', result: { requestCounts: { total: 10, succeeded: 8, failed: 2 } } },
    });

    expect(fake.requests.map((r) => [r.method, r.path, r.apiKey])).toEqual([
      ['GET', `/v1/batches/${batch.id}`, 'sk-b-0123456789'],
      ['GET', `/v1/responses/${response.id}`, 'sk-a-0123456789'],
      ['GET', `/v1/videos/${video.id}`, 'sk-a-0123456789'],
      ['GET', `/v1/fine_tuning/jobs/${job.id}`, 'sk-a-0123456789'],
      ['GET', `/v1/evals/${run.eval_id}/runs/${run.id}`, 'sk-a-0123456789'],
    ]);
  });

  it('refuses a name not of its kind, or of no OpenAI kind, and a credential it has no key for, sending nothing', async () => {
    const p = poller();
    expect(await p.poll({ name: 'openai/batches/../files/x', kind: 'openai-batch' })).toMatchObject({
      kind: 'refused',
      note: 'invalid-name',
    });
    expect(await p.poll({ name: 'openai/responses/resp_1', kind: 'openai-batch' })).toMatchObject({
      kind: 'refused',
      note: 'invalid-name',
    });
    expect(await p.poll({ name: 'anthropic/messages/batches/m1', kind: 'anthropic-batch' })).toMatchObject({
      kind: 'refused',
      note: 'invalid-name',
    });
    expect(await rejectionOf(p.poll({ name: 'openai/batches/b1', kind: 'openai-batch', credential: 'team-z' }))).toMatchObject({
      name: 'PollFailedError',
      message: expect.stringContaining('"team-z"'),
    });
    expect(fake.requests).toEqual([]);
  });

  it('answers not-found for a job OpenAI does not know, and unknown-state for a status it adds later', async () => {
    const p = poller();
    expect(await p.poll({ name: 'openai/batches/batch_gone', kind: 'openai-batch' })).toEqual({ kind: 'not-found' });
    expect(await p.poll({ name: 'openai/evals/eval_x/runs/evalrun_gone', kind: 'openai-eval-run' })).toEqual({ kind: 'not-found' });
    // A status the SDK's types do not know (yet).
    const batch = openaiBatch({ status: 'paused' as never });
    fake.set('batch', batch);
    expect(await p.poll({ name: `openai/batches/${batch.id}`, kind: 'openai-batch' })).toEqual({ kind: 'unknown-state', raw: 'paused' });
  });

  it('notes a refused key by its label (never the key) and fails the poll; the other key is noted accepted', async () => {
    const health = keyHealth();
    const p = poller({ keyHealth: health, keys: [{ label: 'old', apiKey: 'sk-old-0123456789' }, ...KEYS] });
    const batch = openaiBatch({ status: 'in_progress' });
    fake.set('batch', batch);
    fake.refuse('sk-old-0123456789');
    const error = await rejectionOf(p.poll({ name: `openai/batches/${batch.id}`, kind: 'openai-batch', credential: 'old' }));
    expect(error).toMatchObject({ name: 'PollFailedError', status: 401, message: expect.stringContaining('"old"') });
    expect(error.message).not.toContain('sk-old');
    await p.poll({ name: `openai/batches/${batch.id}`, kind: 'openai-batch', credential: 'team-a' });
    expect(health.notes).toEqual([
      ['refused', 'old', 401],
      ['accepted', 'team-a'],
    ]);
  });

  it("holds a key back after a 429 for as long as OpenAI asked, alone: no request while it lasts, the other key's polls go on", async () => {
    const clock = movableClock();
    const p = poller({ clock: clock.now });
    const batch = openaiBatch({ status: 'in_progress' });
    const name = `openai/batches/${batch.id}`;
    fake.set('batch', batch);
    fake.rateLimit('sk-a-0123456789', Number.POSITIVE_INFINITY, 30);

    const limited = await rejectionOf(p.poll({ name, kind: 'openai-batch', credential: 'team-a' }));
    expect(limited).toMatchObject({ name: 'PollFailedError', status: 429, retryAfterSeconds: 30 });
    // The SDK did not wait out the 429 itself: one request.
    expect(fake.requests.filter((r) => r.apiKey === 'sk-a-0123456789')).toHaveLength(1);

    const held = await rejectionOf(p.poll({ name, kind: 'openai-batch', credential: 'team-a' }));
    expect(held).toMatchObject({ name: 'PollFailedError', status: 429, retryAfterSeconds: 30 });
    expect(fake.requests.filter((r) => r.apiKey === 'sk-a-0123456789')).toHaveLength(1);
    expect(await p.poll({ name, kind: 'openai-batch', credential: 'team-b' })).toMatchObject({ kind: 'event' });

    clock.offset += 20_000;
    expect(await rejectionOf(p.poll({ name, kind: 'openai-batch', credential: 'team-a' }))).toMatchObject({ retryAfterSeconds: 10 });
    expect(fake.requests.filter((r) => r.apiKey === 'sk-a-0123456789')).toHaveLength(1);

    fake.rateLimit('sk-a-0123456789', 0);
    clock.offset += 10_001;
    expect(await p.poll({ name, kind: 'openai-batch', credential: 'team-a' })).toMatchObject({ kind: 'event' });
    expect(fake.requests.filter((r) => r.apiKey === 'sk-a-0123456789')).toHaveLength(2);
  });

  it('sends nothing more with a key whose 429 came while other polls of it waited their turn', async () => {
    const p = poller({ requestsPerSecond: 10 });
    const batch = openaiBatch({ status: 'in_progress' });
    fake.set('batch', batch);
    fake.rateLimit('sk-a-0123456789', Number.POSITIVE_INFINITY, 30);
    try {
      const polls = Array.from({ length: 3 }, () => rejectionOf(p.poll({ name: `openai/batches/${batch.id}`, kind: 'openai-batch' })));
      for (const error of await Promise.all(polls)) expect(error).toMatchObject({ name: 'PollFailedError', status: 429 });
      expect(fake.requests).toHaveLength(1);
    } finally {
      fake.rateLimit('sk-a-0123456789', 0);
    }
  });

  it('paces each key on its own: one key at most requestsPerSecond, whoever polls, the other not waiting for it', async () => {
    const p = poller({ requestsPerSecond: 10 });
    const batch = openaiBatch({ status: 'in_progress' });
    const name = `openai/batches/${batch.id}`;
    fake.set('batch', batch);
    const started = Date.now();
    await Promise.all([
      ...Array.from({ length: 4 }, () => p.poll({ name, kind: 'openai-batch', credential: 'team-a' })),
      p.poll({ name, kind: 'openai-batch', credential: 'team-b' }),
    ]);
    const times = (apiKey: string) => fake.requests.filter((r) => r.apiKey === apiKey).map((r) => r.at);
    const a = times('sk-a-0123456789').sort((x, y) => x - y);
    expect(a).toHaveLength(4);
    // 100 ms apart, give or take the timer's millisecond.
    for (let i = 1; i < a.length; i++) expect((a[i] as number) - (a[i - 1] as number)).toBeGreaterThanOrEqual(95);
    expect((times('sk-b-0123456789')[0] as number) - started).toBeLessThan(95);
  });

  it('fails a poll whose answer is slower than its time limit, after one retry', async () => {
    const p = poller({ timeoutMs: 100 });
    const batch = openaiBatch({ status: 'in_progress' });
    fake.set('batch', batch);
    fake.latencyMs = 400;
    expect(await rejectionOf(p.poll({ name: `openai/batches/${batch.id}`, kind: 'openai-batch' }))).toMatchObject({
      name: 'PollFailedError',
    });
    expect(fake.requests).toHaveLength(2);
  });

  it("lists a key's batches newest first for discovery, each event read when asked, and the page after a token", async () => {
    const fresh = await startFakeOpenAI();
    try {
      const now = Math.floor(Date.now() / 1000);
      const [oldest, middle, newest] = [3_000, 2_000, 1_000].map((ago, i) =>
        openaiBatch({ status: i === 0 ? 'completed' : 'in_progress', created_at: now - ago }),
      ) as [Record<string, unknown>, Record<string, unknown>, Record<string, unknown>];
      for (const batch of [oldest, middle, newest]) fresh.set('batch', batch);
      const p = new OpenAIPoller({ keys: KEYS, baseUrl: fresh.url });
      const first = await p.listBatches({ pageSize: 2, credential: 'team-b' });
      expect(first.batches.map((b) => b.name)).toEqual([`openai/batches/${newest.id}`, `openai/batches/${middle.id}`]);
      expect(first.batches[0]?.createTime).toBe(new Date((newest.created_at as number) * 1000).toISOString().replace('Z', '000000Z'));
      expect(first.batches[0]?.event()).toMatchObject({ name: `openai/batches/${newest.id}`, state: 'RUNNING', source: 'poll' });
      const after = await p.listBatches({ pageSize: 2, pageToken: middle.id as string, credential: 'team-b' });
      expect(after.batches.map((b) => b.name)).toEqual([`openai/batches/${oldest.id}`]);
      expect(after.batches[0]?.event()).toMatchObject({ state: 'SUCCEEDED' });
      expect(fresh.requests.map((r) => [r.path, r.apiKey])).toEqual([
        ['/v1/batches', 'sk-b-0123456789'],
        ['/v1/batches', 'sk-b-0123456789'],
      ]);
    } finally {
      await fresh.close();
    }
  });
});

describe('AzureOpenAIPoller, through the SDK’s AzureOpenAI client', () => {
  /** Azure OpenAI's batches as its REST API serves them: `/openai/batches/{id}?api-version=…`, the key in `api-key`. */
  let azure: Listening;
  const batches = new Map<string, Record<string, unknown>>();
  const seen: Array<{ path: string; apiVersion: string | null; apiKey: string | undefined }> = [];
  beforeAll(async () => {
    azure = await listen(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      const apiKey = req.headers['api-key'] as string | undefined;
      seen.push({ path: url.pathname, apiVersion: url.searchParams.get('api-version'), apiKey });
      if (apiKey !== 'azure-key')
        return answer(res, 401, { error: { code: '401', message: 'Access denied due to invalid subscription key.' } });
      const batch = batches.get(decodeURIComponent(url.pathname.replace(/^\/openai\/batches\//, '')));
      if (!batch) return answer(res, 404, { error: { code: '404', message: 'Resource not found' } });
      answer(res, 200, batch);
    });
  });
  afterAll(() => azure.close());

  it("polls its own resource's batches with its key and API version, and refuses another resource's unsent", async () => {
    const batch = openaiBatch({ status: 'expired' });
    batches.set(batch.id as string, batch);
    const p = new AzureOpenAIPoller({ endpoint: azure.origin, resource: 'my-resource', apiKey: 'azure-key' });
    expect(await p.poll({ name: `azure-openai/my-resource/batches/${batch.id}`, kind: 'azure-openai-batch' })).toMatchObject({
      kind: 'event',
      event: {
        name: `azure-openai/my-resource/batches/${batch.id}`,
        kind: 'azure-openai-batch',
        state: 'EXPIRED',
        providerState: 'expired',
        result: { requestCounts: { total: 100, succeeded: 60, failed: 40 } },
      },
    });
    expect(await p.poll({ name: 'azure-openai/my-resource/batches/batch_gone', kind: 'azure-openai-batch' })).toEqual({
      kind: 'not-found',
    });
    expect(await p.poll({ name: `azure-openai/other-resource/batches/${batch.id}`, kind: 'azure-openai-batch' })).toMatchObject({
      kind: 'refused',
      note: 'other-project',
    });
    expect(await p.poll({ name: `openai/batches/${batch.id}`, kind: 'openai-batch' })).toMatchObject({
      kind: 'refused',
      note: 'invalid-name',
    });
    expect(seen).toEqual([
      { path: `/openai/batches/${batch.id}`, apiVersion: '2025-04-01-preview', apiKey: 'azure-key' },
      { path: '/openai/batches/batch_gone', apiVersion: '2025-04-01-preview', apiKey: 'azure-key' },
    ]);
    expect(p.labels).toEqual(['']);
  });

  it("takes the resource from the endpoint's host, and notes a refused key", async () => {
    const health = keyHealth();
    const p = new AzureOpenAIPoller({
      endpoint: 'https://my-resource.openai.azure.com/',
      baseUrl: `${azure.origin}/openai`,
      apiKey: 'wrong',
      keyHealth: health,
    });
    expect(await rejectionOf(p.poll({ name: 'azure-openai/my-resource/batches/b1', kind: 'azure-openai-batch' }))).toMatchObject({
      status: 401,
    });
    expect(health.notes).toEqual([['refused', '', 401]]);
  });
});

describe('AnthropicPoller, through @anthropic-ai/sdk', () => {
  let fake: FakeAnthropic;
  beforeAll(async () => {
    fake = await startFakeAnthropic();
  });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.requests.length = 0;
  });
  const poller = (more: Partial<ConstructorParameters<typeof AnthropicPoller>[0]> = {}) =>
    new AnthropicPoller({ keys: KEYS, baseUrl: fake.url, requestsPerSecond: 1_000, ...more });

  it.each([
    [{ processing_status: 'in_progress' }, 'RUNNING'],
    [{ processing_status: 'canceling' }, 'RUNNING'],
    [{ processing_status: 'ended', request_counts: { processing: 0, succeeded: 9, errored: 1, canceled: 0, expired: 0 } }, 'SUCCEEDED'],
    [{ processing_status: 'ended', request_counts: { processing: 0, succeeded: 0, errored: 0, canceled: 10, expired: 0 } }, 'CANCELLED'],
    [{ processing_status: 'ended', request_counts: { processing: 0, succeeded: 0, errored: 0, canceled: 0, expired: 10 } }, 'EXPIRED'],
    [{ processing_status: 'ended', request_counts: { processing: 0, succeeded: 0, errored: 10, canceled: 0, expired: 0 } }, 'FAILED'],
  ] as const)('polls a batch %j as %s, with the key its credential names', async (over, state) => {
    const batch = anthropicBatch(over);
    fake.set(batch);
    const event = await poller().poll({ name: `anthropic/messages/batches/${batch.id}`, kind: 'anthropic-batch', credential: 'team-b' });
    expect(event).toMatchObject({ kind: 'event', event: { kind: 'anthropic-batch', state, providerState: over.processing_status } });
    if (state !== 'RUNNING')
      expect(event).toMatchObject({ event: { result: { outputUri: batch.results_url, requestCounts: { total: 10 } } } });
    expect(fake.requests.map((r) => [r.path, r.apiKey])).toEqual([[`/v1/messages/batches/${batch.id}`, 'sk-b-0123456789']]);
  });

  it('answers not-found, refuses a name not a Message Batch’s unsent, notes a refused key by label', async () => {
    const health = keyHealth();
    const p = poller({ keyHealth: health });
    expect(await p.poll({ name: 'anthropic/messages/batches/msgbatch_gone', kind: 'anthropic-batch' })).toEqual({ kind: 'not-found' });
    expect(await p.poll({ name: 'anthropic/messages/batches/a/b', kind: 'anthropic-batch' })).toMatchObject({
      kind: 'refused',
      note: 'invalid-name',
    });
    fake.refuse('sk-b-0123456789');
    const error = await rejectionOf(
      p.poll({ name: 'anthropic/messages/batches/msgbatch_1', kind: 'anthropic-batch', credential: 'team-b' }),
    );
    expect(error).toMatchObject({ name: 'PollFailedError', status: 401, message: expect.stringContaining('"team-b"') });
    expect(error.message).not.toContain('sk-b');
    expect(health.notes).toEqual([['refused', 'team-b', 401]]);
    expect(fake.requests).toHaveLength(2);
  });

  it('holds one key back after a 429 for its Retry-After, the other going on', async () => {
    const clock = movableClock();
    const p = new AnthropicPoller({
      keys: [
        { label: 'x', apiKey: 'sk-x' },
        { label: 'y', apiKey: 'sk-y' },
      ],
      baseUrl: fake.url,
      requestsPerSecond: 1_000,
      clock: clock.now,
    });
    const batch = anthropicBatch();
    fake.set(batch);
    const name = `anthropic/messages/batches/${batch.id}`;
    fake.rateLimit('sk-x', Number.POSITIVE_INFINITY, 12);
    expect(await rejectionOf(p.poll({ name, kind: 'anthropic-batch', credential: 'x' }))).toMatchObject({
      status: 429,
      retryAfterSeconds: 12,
    });
    expect(await rejectionOf(p.poll({ name, kind: 'anthropic-batch', credential: 'x' }))).toMatchObject({ status: 429 });
    expect(await p.poll({ name, kind: 'anthropic-batch', credential: 'y' })).toMatchObject({ kind: 'event' });
    expect(fake.requests.map((r) => r.apiKey)).toEqual(['sk-x', 'sk-y']);
    fake.rateLimit('sk-x', 0);
    clock.offset += 12_001;
    expect(await p.poll({ name, kind: 'anthropic-batch', credential: 'x' })).toMatchObject({ kind: 'event' });
  });

  it('paces a key at requestsPerSecond', async () => {
    const batch = anthropicBatch();
    fake.set(batch);
    const p = poller({ requestsPerSecond: 20 });
    await Promise.all(Array.from({ length: 3 }, () => p.poll({ name: `anthropic/messages/batches/${batch.id}`, kind: 'anthropic-batch' })));
    const at = fake.requests.map((r) => r.at).sort((x, y) => x - y);
    expect((at[2] as number) - (at[0] as number)).toBeGreaterThanOrEqual(95);
  });

  it("lists a key's batches newest first for discovery, and the page after a token", async () => {
    const fresh = await startFakeAnthropic();
    try {
      const now = Date.now();
      const [older, newer] = [
        anthropicBatch({ created_at: new Date(now - 60_000).toISOString() }),
        anthropicBatch({ processing_status: 'ended', created_at: new Date(now - 1_000).toISOString() }),
      ];
      fresh.set(older);
      fresh.set(newer);
      const p = new AnthropicPoller({ keys: KEYS, baseUrl: fresh.url });
      const first = await p.listBatches({ pageSize: 1 });
      expect(first.batches.map((b) => b.name)).toEqual([`anthropic/messages/batches/${newer.id}`]);
      expect(first.batches[0]?.event()).toMatchObject({ state: 'SUCCEEDED' });
      expect(first.batches[0]?.createTime).toBe(new Date(now - 1_000).toISOString().replace('Z', '000000Z'));
      const next = await p.listBatches({ pageSize: 1, pageToken: newer.id as string });
      expect(next.batches.map((b) => b.name)).toEqual([`anthropic/messages/batches/${older.id}`]);
    } finally {
      await fresh.close();
    }
  });
});

describe('BedrockPoller, through @aws-sdk/client-bedrock', () => {
  let fake: FakeBedrock;
  const credentials = { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake-secret' };
  beforeAll(async () => {
    fake = await startFakeBedrock();
  });
  afterAll(() => fake.close());
  beforeEach(() => {
    fake.requests.length = 0;
  });
  const poller = (more: Partial<ConstructorParameters<typeof BedrockPoller>[0]> = {}) =>
    new BedrockPoller({ region: 'eu-west-1', account: '123456789012', endpoint: fake.url, credentials, requestsPerSecond: 1_000, ...more });

  it('polls a job by the ARN rebuilt from its name, its output and records in the result', async () => {
    const job = bedrockJob({ status: 'PartiallyCompleted' }, { region: 'eu-west-1', account: '123456789012' });
    fake.set(job);
    const id = String(job.jobArn).split('/').at(-1);
    const name = `bedrock/eu-west-1/123456789012/model-invocation-jobs/${id}`;
    expect(await poller().poll({ name, kind: 'bedrock-batch' })).toEqual({
      kind: 'event',
      event: {
        name,
        kind: 'bedrock-batch',
        state: 'SUCCEEDED',
        providerState: 'PartiallyCompleted',
        updateTime: new Date(job.lastModifiedTime as string).toISOString().replace('Z', '000000Z'),
        source: 'poll',
        result: {
          outputUri: (job.outputDataConfig as { s3OutputDataConfig: { s3Uri: string } }).s3OutputDataConfig.s3Uri,
          requestCounts: { total: 100, succeeded: 90, failed: 10 },
        },
      },
    });
    expect(fake.requests.map((r) => [r.method, decodeURIComponent(r.path), r.region])).toEqual([
      ['GET', `/model-invocation-job/${job.jobArn}`, 'eu-west-1'],
    ]);
  });

  it("refuses another region's or account's job unsent, answers not-found and unknown-state", async () => {
    const p = poller();
    expect(await p.poll({ name: 'bedrock/us-east-1/123456789012/model-invocation-jobs/abc', kind: 'bedrock-batch' })).toMatchObject({
      kind: 'refused',
      note: 'other-project',
    });
    expect(await p.poll({ name: 'bedrock/eu-west-1/999999999999/model-invocation-jobs/abc', kind: 'bedrock-batch' })).toMatchObject({
      kind: 'refused',
      note: 'other-project',
    });
    expect(await p.poll({ name: 'bedrock/eu-west-1/123456789012/model-invocation-job/abc', kind: 'bedrock-batch' })).toMatchObject({
      kind: 'refused',
      note: 'invalid-name',
    });
    expect(fake.requests).toEqual([]);
    expect(await p.poll({ name: 'bedrock/eu-west-1/123456789012/model-invocation-jobs/gone', kind: 'bedrock-batch' })).toEqual({
      kind: 'not-found',
    });
    // A status the SDK's types do not know (yet).
    const job = bedrockJob({ status: 'Paused' as never }, { region: 'eu-west-1' });
    fake.set(job);
    const id = String(job.jobArn).split('/').at(-1);
    expect(await p.poll({ name: `bedrock/eu-west-1/123456789012/model-invocation-jobs/${id}`, kind: 'bedrock-batch' })).toEqual({
      kind: 'unknown-state',
      raw: 'Paused',
    });
  });

  it('fails a throttled poll after one retry as a 429, and holds the credential back a moment', async () => {
    const clock = movableClock();
    const p = poller({ clock: clock.now });
    const job = bedrockJob({ status: 'InProgress' }, { region: 'eu-west-1' });
    fake.set(job);
    const name = `bedrock/eu-west-1/123456789012/model-invocation-jobs/${String(job.jobArn).split('/').at(-1)}`;
    fake.rateLimit(Number.POSITIVE_INFINITY);
    try {
      expect(await rejectionOf(p.poll({ name, kind: 'bedrock-batch' }))).toMatchObject({ name: 'PollFailedError', status: 429 });
      expect(fake.requests).toHaveLength(2);
      expect(await rejectionOf(p.poll({ name, kind: 'bedrock-batch' }))).toMatchObject({ status: 429 });
      expect(fake.requests).toHaveLength(2);
    } finally {
      fake.rateLimit(0);
    }
    clock.offset += 60_000;
    expect(await p.poll({ name, kind: 'bedrock-batch' })).toMatchObject({ kind: 'event', event: { state: 'RUNNING' } });
  });

  it('reaches the endpoint AWS_ENDPOINT_URL_BEDROCK names when given none', async () => {
    const job = bedrockJob({ status: 'Submitted' }, { region: 'eu-west-1' });
    fake.set(job);
    const before = process.env.AWS_ENDPOINT_URL_BEDROCK;
    process.env.AWS_ENDPOINT_URL_BEDROCK = fake.url;
    try {
      const p = new BedrockPoller({ region: 'eu-west-1', credentials });
      const name = `bedrock/eu-west-1/123456789012/model-invocation-jobs/${String(job.jobArn).split('/').at(-1)}`;
      expect(await p.poll({ name, kind: 'bedrock-batch' })).toMatchObject({ kind: 'event', event: { state: 'PENDING' } });
    } finally {
      if (before === undefined) delete process.env.AWS_ENDPOINT_URL_BEDROCK;
      else process.env.AWS_ENDPOINT_URL_BEDROCK = before;
    }
    expect(fake.requests).toHaveLength(1);
  });
});
