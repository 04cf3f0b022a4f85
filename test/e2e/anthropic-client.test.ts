/**
 * `ratchet/anthropic` end to end: the real `@anthropic-ai/sdk` against the
 * fake Anthropic on 127.0.0.1 and a real Ratchet (the local runtime, as
 * `ratchet start` runs it). `messages.batches.create` and its beta twin,
 * wrapped by `trackJobs`: each batch known to Ratchet, with its key's label,
 * the moment the create returns; a tracking failure never hides the batch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { trackJobs } from '../../sdk/anthropic.ts';
import { RatchetClient } from '../../sdk/client.ts';
import { type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { eventually } from '../support/receiver.ts';

const KEYS = 'team-a=sk-ant-a,team-b=sk-ant-b';
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-anthropic-client-'));
let fake: FakeAnthropic;
let runtime: LocalRuntime;
let ratchet: RatchetClient;

beforeAll(async () => {
  fake = await startFakeAnthropic();
  runtime = await startLocalRuntime(loadConfig({ DATA_DIR: dataDir, PORT: '0', ANTHROPIC_API_KEYS: KEYS, ANTHROPIC_BASE_URL: fake.url }));
  ratchet = new RatchetClient({ url: runtime.url, token: runtime.apiToken });
  // The first reconcile run lists each key's batches (discovery): once it has, a batch created here is this test's to track.
  const listed = (key: string) => fake.requests.some((r) => r.method === 'GET' && r.path === '/v1/messages/batches' && r.apiKey === key);
  await eventually(() => listed('sk-ant-a') && listed('sk-ant-b'), 20_000, 'the first discovery sweep');
});
afterAll(async () => {
  await runtime?.stop();
  await fake?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const sdk = (apiKey = 'sk-ant-a') => new Anthropic({ apiKey, baseURL: fake.url, maxRetries: 0 });
const requests = [
  { custom_id: 'q1', params: { model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user' as const, content: 'hi' }] } },
];

describe('trackJobs on the Anthropic SDK', () => {
  it('tracks a batch before create returns, with the label of the client’s key; the answer is the SDK’s own', async () => {
    const anthropic = trackJobs(sdk('sk-ant-b'), ratchet, { keys: KEYS });
    const batch = await anthropic.messages.batches.create({ requests });
    expect(batch.id).toMatch(/^msgbatch_/);
    expect(await ratchet.get(`anthropic/messages/batches/${batch.id}`)).toMatchObject({
      kind: 'anthropic-batch',
      credential: 'team-b',
    });
    const { data, response } = await anthropic.messages.batches.create({ requests }).withResponse();
    expect(response.status).toBe(200);
    expect(await ratchet.get(`anthropic/messages/batches/${data.id}`)).toMatchObject({ kind: 'anthropic-batch', credential: 'team-b' });
  });

  it('tracks a batch made through the beta messages API', async () => {
    const anthropic = trackJobs(sdk(), ratchet, { credential: 'team-a' });
    const batch = await anthropic.beta.messages.batches.create({ requests });
    expect(fake.requests.at(-1)).toMatchObject({ method: 'POST', path: '/v1/messages/batches' });
    expect(await ratchet.get(`anthropic/messages/batches/${batch.id}`)).toMatchObject({ kind: 'anthropic-batch', credential: 'team-a' });
  });

  it('returns a batch whose tracking failed (Ratchet unreachable), and reports it', async () => {
    const failures: Array<{ name: string; message: string }> = [];
    const warnings: string[] = [];
    const offline = new RatchetClient({ url: 'http://127.0.0.1:9', retries: 0 });
    const anthropic = trackJobs(sdk(), offline, {
      onTrackError: (error, name) => failures.push({ name, message: error.message }),
      logger: { warn: (message: string) => warnings.push(message) },
    });
    const batch = await anthropic.messages.batches.create({ requests });
    expect(fake.get(batch.id)).toMatchObject({ processing_status: 'in_progress' });
    expect(failures).toEqual([{ name: `anthropic/messages/batches/${batch.id}`, message: expect.stringMatching(/127\.0\.0\.1/) }]);
    expect(warnings).toEqual([expect.stringContaining(`anthropic/messages/batches/${batch.id} was created but could not be tracked`)]);
  });
});
