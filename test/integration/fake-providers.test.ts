/**
 * The fake OpenAI, Anthropic and Bedrock servers (test/support/fake-*.ts) driven through the real SDKs from npm,
 * each pointed at its fake by its base-URL setting: what a create, a get and a list answer, the SDK's own error
 * for a rate-limited key, a refused key and an unknown id, and an OpenAI webhook delivery the SDK verifies. The
 * provider tests build on these fakes; this file holds them to what the SDKs expect.
 */

import { randomBytes } from 'node:crypto';
import Anthropic from '@anthropic-ai/sdk';
import {
  BedrockClient,
  CreateModelInvocationJobCommand,
  GetModelInvocationJobCommand,
  ListModelInvocationJobsCommand,
  paginateListModelInvocationJobs,
  ResourceNotFoundException,
  ThrottlingException,
} from '@aws-sdk/client-bedrock';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { anthropicBatch, type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { bedrockJob, type FakeBedrock, startFakeBedrock } from '../support/fake-bedrock.ts';
import {
  type FakeOpenAI,
  openaiBatch,
  openaiDelivery,
  openaiEvalRun,
  openaiFineTuningJob,
  openaiResponse,
  openaiVideo,
  startFakeOpenAI,
} from '../support/fake-openai.ts';

/** Each call's rejection, so that a test can look at the SDK's error. */
async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

/** Every item an SDK's auto-paging list yields. */
async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const all: T[] = [];
  for await (const item of items) all.push(item);
  return all;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

describe('the fake OpenAI, through the openai SDK', () => {
  let fake: FakeOpenAI;
  const client = (apiKey = 'sk-test') => new OpenAI({ baseURL: fake.url, apiKey, maxRetries: 0 });

  beforeAll(async () => {
    fake = await startFakeOpenAI();
  });
  afterAll(() => fake.close());

  it('creates each kind of job at its first state, and gets it back as created', async () => {
    const openai = client();
    const batch = await openai.batches.create({ input_file_id: 'file-in', endpoint: '/v1/chat/completions', completion_window: '24h' });
    expect(batch).toMatchObject({ object: 'batch', status: 'validating', input_file_id: 'file-in', endpoint: '/v1/chat/completions' });
    expect(batch.id).toMatch(/^batch_/);
    expect(batch.created_at).toBeGreaterThanOrEqual(nowSeconds() - 1);
    expect(await openai.batches.retrieve(batch.id)).toEqual(batch);

    const response = await openai.responses.create({ model: 'gpt-5', input: 'Hello', background: true });
    expect(response).toMatchObject({ object: 'response', status: 'queued', background: true, model: 'gpt-5' });
    expect((await openai.responses.retrieve(response.id)).status).toBe('queued');

    const video = await openai.videos.create({ prompt: 'A lighthouse at dawn', model: 'sora-2', seconds: '8' });
    expect(video).toMatchObject({ object: 'video', status: 'queued', prompt: 'A lighthouse at dawn', seconds: '8', progress: 0 });
    expect(await openai.videos.retrieve(video.id)).toEqual(video);
    const remix = await openai.videos.remix(video.id, { prompt: 'The same lighthouse at dusk' });
    expect(remix).toMatchObject({ status: 'queued', remixed_from_video_id: video.id, prompt: 'The same lighthouse at dusk', seconds: '8' });
    expect(remix.id).not.toBe(video.id);

    const job = await openai.fineTuning.jobs.create({ model: 'gpt-4o-mini-2024-07-18', training_file: 'file-train' });
    expect(job).toMatchObject({
      object: 'fine_tuning.job',
      status: 'validating_files',
      training_file: 'file-train',
      fine_tuned_model: null,
    });
    expect(await openai.fineTuning.jobs.retrieve(job.id)).toEqual(job);

    const run = await openai.evals.runs.create('eval_quality', {
      name: 'nightly',
      data_source: { type: 'jsonl', source: { type: 'file_id', id: 'file-items' } },
    });
    expect(run).toMatchObject({ object: 'eval.run', status: 'queued', eval_id: 'eval_quality', name: 'nightly' });
    expect(await openai.evals.runs.retrieve(run.id, { eval_id: 'eval_quality' })).toEqual(run);
    expect(fake.get('eval-run', run.id)).toEqual(run);
  });

  it('answers a job as a test sets it, with the fields of its state', async () => {
    const openai = client();
    const batch = openaiBatch({ status: 'completed' });
    fake.set('batch', batch);
    const got = await openai.batches.retrieve(String(batch.id));
    expect(got).toMatchObject({ status: 'completed', request_counts: { total: 100, completed: 98, failed: 2 } });
    expect(got.output_file_id).toMatch(/^file-/);
    expect(got.completed_at).toBe(nowSeconds());
    expect(got.created_at).toBeLessThan(got.in_progress_at as number);
    expect(got.finalizing_at).toBeLessThan(got.completed_at as number);

    const response = openaiResponse({ status: 'incomplete' });
    fake.set('response', response);
    const answered = await openai.responses.retrieve(String(response.id));
    expect(answered.incomplete_details).toEqual({ reason: 'max_output_tokens' });
    expect(answered.output_text).toBe('Partly'); // the SDK reads the output as it reads OpenAI's

    const video = openaiVideo({ status: 'completed' });
    fake.set('video', video);
    expect(await openai.videos.retrieve(String(video.id))).toMatchObject({
      status: 'completed',
      progress: 100,
      completed_at: nowSeconds(),
    });

    const job = openaiFineTuningJob({ status: 'succeeded' });
    fake.set('fine-tuning', job);
    expect((await openai.fineTuning.jobs.retrieve(String(job.id))).fine_tuned_model).toMatch(/^ft:gpt-4o-mini/);

    const run = openaiEvalRun({ eval_id: 'eval_set', status: 'completed' });
    fake.set('eval-run', run);
    expect(await openai.evals.runs.retrieve(String(run.id), { eval_id: 'eval_set' })).toMatchObject({
      status: 'completed',
      result_counts: { total: 10, passed: 8, failed: 2, errored: 0 },
    });
  });

  it('lists newest first, a page at a time, and the SDK pages through all', async () => {
    const openai = client();
    const start = nowSeconds() - 3_600;
    const made = [0, 1, 2, 3, 4].map((minute) => openaiFineTuningJob({ created_at: start + minute * 60, metadata: { list: 'paged' } }));
    for (const job of [made[3], made[0], made[4], made[1], made[2]]) fake.set('fine-tuning', job as Record<string, unknown>);
    const newest = made.map((job) => String(job.id)).reverse();

    const page = await openai.fineTuning.jobs.list({ limit: 2 });
    const ours = (await collect(openai.fineTuning.jobs.list({ limit: 2 }))).filter((job) => job.metadata?.list === 'paged');
    expect(ours.map((job) => job.id)).toEqual(newest);
    expect(page.has_more).toBe(true);
    expect(page.data).toHaveLength(2);

    const listed = await fetch(`${fake.url}/batches?limit=1`, { headers: { authorization: 'Bearer sk-test' } }).then(
      (r) => r.json() as Promise<{ first_id: string; last_id: string }>,
    );
    expect(listed).toMatchObject({ object: 'list', has_more: true });
    expect(listed.first_id).toBe(listed.last_id);

    const runs = await collect(openai.evals.runs.list('eval_paged', { limit: 1 }));
    expect(runs).toEqual([]);
  });

  it('answers 429 with Retry-After to a rate-limited key, as many times as set, and never to another key', async () => {
    fake.rateLimit('sk-limited', 2, 7);
    const error = await rejectionOf(client('sk-limited').batches.list());
    expect(error).toBeInstanceOf(OpenAI.RateLimitError);
    expect((error as InstanceType<typeof OpenAI.RateLimitError>).status).toBe(429);
    expect((error as InstanceType<typeof OpenAI.RateLimitError>).headers.get('retry-after')).toBe('7');
    expect((error as InstanceType<typeof OpenAI.RateLimitError>).code).toBe('rate_limit_exceeded');
    await expect(client('sk-other').batches.list()).resolves.toBeDefined();
    await expect(client('sk-limited').batches.list()).rejects.toBeInstanceOf(OpenAI.RateLimitError);
    await expect(client('sk-limited').batches.list()).resolves.toBeDefined();

    fake.rateLimit('sk-limited', Number.POSITIVE_INFINITY);
    for (let i = 0; i < 3; i++) await expect(client('sk-limited').batches.list()).rejects.toBeInstanceOf(OpenAI.RateLimitError);
    fake.rateLimit('sk-limited', 0);
    await expect(client('sk-limited').batches.list()).resolves.toBeDefined();
  });

  it("answers 401 invalid_api_key to a refused key, 404 in OpenAI's shape to an unknown id", async () => {
    fake.refuse('sk-revoked');
    const refused = await rejectionOf(client('sk-revoked').batches.retrieve('batch_any'));
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe('invalid_api_key');

    const openai = client();
    for (const lookup of [
      openai.batches.retrieve('batch_unknown'),
      openai.responses.retrieve('resp_unknown'),
      openai.videos.retrieve('video_unknown'),
      openai.fineTuning.jobs.retrieve('ftjob-unknown'),
      openai.evals.runs.retrieve('evalrun_unknown', { eval_id: 'eval_any' }),
    ]) {
      const error = await rejectionOf(lookup);
      expect(error).toBeInstanceOf(OpenAI.NotFoundError);
      expect((error as InstanceType<typeof OpenAI.NotFoundError>).type).toBe('invalid_request_error');
    }
    // A run is found under its own eval only.
    const run = openaiEvalRun({ eval_id: 'eval_own' });
    fake.set('eval-run', run);
    await expect(openai.evals.runs.retrieve(String(run.id), { eval_id: 'eval_other' })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });

  it('logs every request with its key, and answers after its latency', async () => {
    const openai = client('sk-logged');
    const job = openaiVideo();
    fake.set('video', job);
    fake.latencyMs = 150;
    const asked = Date.now();
    await openai.videos.retrieve(String(job.id));
    expect(Date.now() - asked).toBeGreaterThanOrEqual(100); // timers may fire a little early; without the latency it is ~1 ms
    fake.latencyMs = 0;
    expect(fake.requests.filter((request) => request.apiKey === 'sk-logged')).toEqual([
      { method: 'GET', path: `/v1/videos/${job.id}`, apiKey: 'sk-logged', at: expect.any(Number) },
    ]);
  });

  it('signs a webhook delivery the SDK verifies, as OpenAI sends it', async () => {
    const webhookSecret = `whsec_${randomBytes(32).toString('base64')}`;
    const openai = new (await import('openai')).default({ apiKey: 'x', webhookSecret });
    const delivery = openaiDelivery(webhookSecret, { type: 'batch.completed', id: 'batch_done', createdAt: nowSeconds() - 5 });
    const event = await openai.webhooks.unwrap(delivery.body, delivery.headers);
    expect(event).toMatchObject({ object: 'event', type: 'batch.completed', created_at: nowSeconds() - 5, data: { id: 'batch_done' } });
    expect(event.id).toMatch(/^evt_/);

    const run = openaiDelivery(webhookSecret, { type: 'eval.run.succeeded', id: 'evalrun_1', eventId: 'evt_fixed' });
    expect(await openai.webhooks.unwrap(run.body, run.headers)).toMatchObject({ id: 'evt_fixed', data: { id: 'evalrun_1' } });
    // A redelivery of the same event carries the same webhook-id.
    expect(openaiDelivery(webhookSecret, { type: 'eval.run.succeeded', id: 'evalrun_1', eventId: 'evt_fixed' }).headers['webhook-id']).toBe(
      run.headers['webhook-id'],
    );

    const otherSecret = `whsec_${randomBytes(32).toString('base64')}`;
    await expect(openai.webhooks.unwrap(delivery.body, delivery.headers, otherSecret)).rejects.toBeInstanceOf(
      OpenAI.InvalidWebhookSignatureError,
    );
  });
});

describe('the fake Anthropic, through @anthropic-ai/sdk', () => {
  let fake: FakeAnthropic;
  const client = (apiKey = 'sk-ant-test') => new Anthropic({ baseURL: fake.url, apiKey, maxRetries: 0 });
  const request = (custom_id: string) => ({
    custom_id,
    params: { model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user' as const, content: 'Hello' }] },
  });

  beforeAll(async () => {
    fake = await startFakeAnthropic();
  });
  afterAll(() => fake.close());

  it('creates a batch in progress, every request processing, and gets it back', async () => {
    const anthropic = client();
    const batch = await anthropic.messages.batches.create({ requests: [request('a'), request('b'), request('c')] });
    expect(batch).toMatchObject({
      type: 'message_batch',
      processing_status: 'in_progress',
      request_counts: { processing: 3, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
      ended_at: null,
      results_url: null,
    });
    expect(batch.id).toMatch(/^msgbatch_/);
    expect(Date.parse(batch.expires_at) - Date.parse(batch.created_at)).toBe(86_400_000);
    expect(await anthropic.messages.batches.retrieve(batch.id)).toEqual(batch);
    expect(fake.requests.at(-1)).toEqual({
      method: 'GET',
      path: `/v1/messages/batches/${batch.id}`,
      apiKey: 'sk-ant-test',
      at: expect.any(Number),
    });
    // The key as the API documents it (`x-api-key`) is taken too.
    const raw = await fetch(`${fake.url}/v1/messages/batches/${batch.id}`, { headers: { 'x-api-key': 'sk-ant-raw' } });
    expect(raw.status).toBe(200);
    expect(fake.requests.at(-1)?.apiKey).toBe('sk-ant-raw');

    const ended = anthropicBatch({ id: batch.id, processing_status: 'ended' });
    fake.set(ended);
    const got = await anthropic.messages.batches.retrieve(batch.id);
    expect(got).toMatchObject({ processing_status: 'ended', request_counts: { processing: 0, succeeded: 9, errored: 1 } });
    expect(got.results_url).toBe(`https://api.anthropic.com/v1/messages/batches/${batch.id}/results`);
    expect(Date.parse(got.ended_at as string)).toBeGreaterThan(Date.parse(got.created_at));
  });

  it('lists newest first, after_id and before_id a page at a time, and the SDK pages through all', async () => {
    const anthropic = client();
    const start = Date.now() - 3_600_000;
    const made = [0, 1, 2, 3, 4].map((minute) =>
      anthropicBatch({ created_at: new Date(start - 86_400_000 + minute * 60_000).toISOString() }),
    );
    for (const batch of [made[2], made[4], made[0], made[3], made[1]]) fake.set(batch as Record<string, unknown>);
    const newest = made.map((batch) => String(batch.id)).reverse();

    const all = (await collect(anthropic.messages.batches.list({ limit: 2 }))).map((batch) => batch.id);
    expect(all.filter((id) => newest.includes(id))).toEqual(newest);
    expect(all.slice(-5)).toEqual(newest); // older than every batch the other tests made

    const after = await anthropic.messages.batches.list({ after_id: newest[1], limit: 2 });
    expect(after.data.map((batch) => batch.id)).toEqual(newest.slice(2, 4));
    expect(after.has_more).toBe(true);
    expect(after).toMatchObject({ first_id: newest[2], last_id: newest[3] });
    const before = await anthropic.messages.batches.list({ before_id: newest[4], limit: 2 });
    expect(before.data.map((batch) => batch.id)).toEqual(newest.slice(2, 4));
  });

  it('answers 429 to a rate-limited key only, 401 to a refused key, 404 to an unknown id', async () => {
    fake.rateLimit('sk-ant-limited', 1, 30);
    const limited = await rejectionOf(client('sk-ant-limited').messages.batches.list());
    expect(limited).toBeInstanceOf(Anthropic.RateLimitError);
    expect((limited as InstanceType<typeof Anthropic.RateLimitError>).headers?.get('retry-after')).toBe('30');
    expect((limited as InstanceType<typeof Anthropic.RateLimitError>).error).toMatchObject({
      type: 'error',
      error: { type: 'rate_limit_error' },
    });
    await expect(client('sk-ant-other').messages.batches.list()).resolves.toBeDefined();
    await expect(client('sk-ant-limited').messages.batches.list()).resolves.toBeDefined();

    fake.refuse('sk-ant-revoked');
    await expect(client('sk-ant-revoked').messages.batches.list()).rejects.toBeInstanceOf(Anthropic.AuthenticationError);

    const missing = await rejectionOf(client().messages.batches.retrieve('msgbatch_unknown'));
    expect(missing).toBeInstanceOf(Anthropic.NotFoundError);
    expect((missing as InstanceType<typeof Anthropic.NotFoundError>).error).toMatchObject({ error: { type: 'not_found_error' } });
  });
});

describe('the fake Bedrock, through @aws-sdk/client-bedrock', () => {
  let fake: FakeBedrock;
  let bedrock: BedrockClient;
  const job = {
    jobName: 'nightly-summaries',
    roleArn: 'arn:aws:iam::123456789012:role/ratchet-bedrock-batch',
    modelId: 'anthropic.claude-3-haiku-20240307-v1:0',
    inputDataConfig: { s3InputDataConfig: { s3Uri: 's3://in-bucket/records.jsonl' } },
    outputDataConfig: { s3OutputDataConfig: { s3Uri: 's3://out-bucket/nightly/' } },
  };

  beforeAll(async () => {
    fake = await startFakeBedrock();
    bedrock = new BedrockClient({
      endpoint: fake.url,
      region: 'eu-west-1',
      credentials: { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake-secret' },
      maxAttempts: 1,
    });
  });
  afterAll(async () => {
    bedrock.destroy();
    await fake.close();
  });

  it('creates a job in the region it was signed for, and gets it by its ARN and by its id', async () => {
    const { jobArn } = await bedrock.send(new CreateModelInvocationJobCommand(job));
    expect(jobArn).toMatch(/^arn:aws:bedrock:eu-west-1:123456789012:model-invocation-job\/[a-z0-9]{12}$/);
    const id = String(jobArn).split('/').at(-1) as string;
    const byArn = await bedrock.send(new GetModelInvocationJobCommand({ jobIdentifier: jobArn }));
    expect(byArn).toMatchObject({ jobArn, status: 'Submitted', jobName: 'nightly-summaries', outputDataConfig: job.outputDataConfig });
    expect(byArn.submitTime).toBeInstanceOf(Date);
    expect(byArn.endTime).toBeUndefined();
    const byId = await bedrock.send(new GetModelInvocationJobCommand({ jobIdentifier: id }));
    expect(byId.jobArn).toBe(jobArn);
    expect(fake.requests.at(-1)).toMatchObject({
      method: 'GET',
      path: `/model-invocation-job/${id}`,
      accessKeyId: 'AKIDFAKE',
      region: 'eu-west-1',
    });

    fake.set(bedrockJob({ jobArn, status: 'Completed', jobName: 'nightly-summaries' }));
    const done = await bedrock.send(new GetModelInvocationJobCommand({ jobIdentifier: jobArn }));
    expect(done).toMatchObject({ status: 'Completed', successRecordCount: 100, errorRecordCount: 0 });
    expect(done.endTime?.getTime()).toBe(done.lastModifiedTime?.getTime());
    expect(Math.abs((done.endTime?.getTime() ?? 0) - Date.now())).toBeLessThan(5_000);
    expect(fake.get(id)).toMatchObject({ status: 'Completed' });
  });

  it('lists newest first, a page at a time, filtered by status', async () => {
    const start = Date.now() - 86_400_000;
    const made = [0, 1, 2, 3].map((minute) =>
      bedrockJob({ status: 'InProgress', submitTime: new Date(start + minute * 60_000).toISOString() }, { region: 'eu-west-1' }),
    );
    for (const made1 of [made[1], made[3], made[0], made[2]]) fake.set(made1 as Record<string, unknown>);
    const newest = made.map((one) => String(one.jobArn)).reverse();

    const first = await bedrock.send(new ListModelInvocationJobsCommand({ statusEquals: 'InProgress', maxResults: 3 }));
    expect(first.invocationJobSummaries?.map((summary) => summary.jobArn)).toEqual(newest.slice(0, 3));
    expect(first.nextToken).toBeDefined();
    const arns: string[] = [];
    for await (const page of paginateListModelInvocationJobs({ client: bedrock, pageSize: 3 }, { statusEquals: 'InProgress' }))
      arns.push(...(page.invocationJobSummaries ?? []).map((summary) => String(summary.jobArn)));
    expect(arns).toEqual(newest);
  });

  it('answers ThrottlingException (429) while rate-limited, and ResourceNotFoundException for an unknown job', async () => {
    fake.rateLimit(1);
    const throttled = await rejectionOf(bedrock.send(new GetModelInvocationJobCommand({ jobIdentifier: 'abcdefabcdef' })));
    expect(throttled).toBeInstanceOf(ThrottlingException);
    expect((throttled as ThrottlingException).$metadata.httpStatusCode).toBe(429);
    const missing = await rejectionOf(bedrock.send(new GetModelInvocationJobCommand({ jobIdentifier: 'abcdefabcdef' })));
    expect(missing).toBeInstanceOf(ResourceNotFoundException);
    expect((missing as ResourceNotFoundException).$metadata.httpStatusCode).toBe(404);
  });
});
