/**
 * OpenAI's and Anthropic's jobs inside an application's own process
 * (`createRatchet`), the provider credentials given as options: an OpenAI
 * delivery through `fetch`, the outcome polled by a cron's `tick()`, every
 * change to the application's `onChange` once, in order, with its provider.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { StateChange } from '../../app/effects/app-sink.ts';
import { createRatchet, type Ratchet } from '../../local/library.ts';
import { newSecret } from '../support/deliveries.ts';
import { anthropicBatch, type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { type FakeOpenAI, openaiBatch, openaiDelivery, startFakeOpenAI } from '../support/fake-openai.ts';
import { eventually } from '../support/receiver.ts';

const openaiSecret = newSecret();
let openai: FakeOpenAI;
let anthropic: FakeAnthropic;
let ratchet: Ratchet;
const seen: StateChange[] = [];

beforeAll(async () => {
  openai = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
  ratchet = createRatchet({
    dataDir: ':memory:',
    webhookSigningSecrets: newSecret(),
    apiToken: 'library-token-0123456789abcdef',
    openaiApiKey: 'sk-app',
    openaiBaseUrl: openai.url,
    openaiWebhookSecret: openaiSecret,
    anthropicApiKey: 'sk-ant-app',
    anthropicBaseUrl: anthropic.url,
    onChange: (event) => {
      seen.push(event);
    },
    env: {},
  });
  await ratchet.ready();
});

afterAll(async () => {
  await ratchet?.close();
  await openai?.close();
  await anthropic?.close();
});

describe('createRatchet with provider credentials', () => {
  it('takes an OpenAI delivery through fetch and its outcome by tick, each change to onChange once, in order', async () => {
    const batch = openaiBatch({ status: 'finalizing' });
    const id = batch.id as string;
    const name = `openai/batches/${id}`;
    openai.set('batch', batch);
    // Tracked and polled once: its next poll is an interval away.
    await ratchet.client.track(name);
    expect((await ratchet.tick({ budgetMs: 5_000 })).reconcile).toMatchObject({ polled: 1, applied: 1 });
    expect((await ratchet.tick({ budgetMs: 5_000 })).reconcile).toMatchObject({ polled: 0 });
    const { body, headers } = openaiDelivery(openaiSecret, { type: 'batch.completed', id });
    const answer = await ratchet.fetch(new Request('http://localhost/webhooks/openai', { method: 'POST', body, headers }));
    expect(answer.status).toBe(200);
    expect(await ratchet.client.get(name)).toMatchObject({ state: 'SUCCEEDED', resultPending: true, provider: 'openai' });
    openai.set('batch', openaiBatch({ id, status: 'completed' }));
    // The bare end asked for the poll that brings its outcome: due at once, not at its schedule.
    const round = await ratchet.tick({ budgetMs: 5_000 });
    expect(round.reconcile).toMatchObject({ polled: 1, applied: 1 });
    expect(await ratchet.client.get(name)).toMatchObject({ version: 4, result: { requestCounts: { total: expect.any(Number) } } });
    // The effects go out from the engine's own work (on SQLite, its second process), in order.
    const mine = () => seen.filter((event) => event.data.name === name);
    await eventually(() => mine().length === 3, 20_000, 'every effect');
    expect(mine().map((event) => [event.type, event.data.provider, event.data.version])).toEqual([
      ['operation.state_changed', 'openai', 2],
      ['operation.state_changed', 'openai', 3],
      ['operation.result', 'openai', 4],
    ]);
  });

  it('answers an OpenAI delivery 503 while no OpenAI webhook secret is set (the sender keeps it), and records nothing', async () => {
    const bare = createRatchet({ dataDir: ':memory:', webhookSigningSecrets: newSecret(), openaiApiKey: 'sk-app', env: {} });
    try {
      const { body, headers } = openaiDelivery(openaiSecret, { type: 'batch.completed', id: 'batch_unconfigured' });
      const answer = await bare.fetch(new Request('http://localhost/webhooks/openai', { method: 'POST', body, headers }));
      expect(answer.status).toBe(503);
      expect(answer.headers.get('retry-after')).not.toBeNull();
      expect(await answer.json()).toMatchObject({ error: 'not-configured' });
      expect(await bare.client.get('openai/batches/batch_unconfigured')).toBeUndefined();
    } finally {
      await bare.close();
    }
  });

  it('leaves a job of a provider it has no credential for unpolled, not failed, and says why on the job', async () => {
    await ratchet.client.track('batches/no-gemini-key-here');
    const round = await ratchet.tick({ budgetMs: 5_000 });
    expect(round.reconcile).toMatchObject({ failed: 0 });
    const view = await ratchet.client.get('batches/no-gemini-key-here');
    expect(view?.polling).toMatchObject({ failedPolls: 0, note: expect.stringContaining('no credential for gemini') });
    expect(view?.polling?.nextPollAt).not.toBeNull();
  });

  it('follows an Anthropic batch it tracks by tick alone', async () => {
    const batch = anthropicBatch({ processing_status: 'in_progress' });
    const name = `anthropic/messages/batches/${batch.id as string}`;
    anthropic.set(batch);
    await ratchet.client.track(name);
    anthropic.set(
      anthropicBatch({
        id: batch.id as string,
        processing_status: 'ended',
        request_counts: { processing: 0, succeeded: 4, errored: 1, canceled: 0, expired: 0 },
      }),
    );
    await ratchet.tick({ budgetMs: 5_000 });
    expect(await ratchet.client.get(name)).toMatchObject({
      state: 'SUCCEEDED',
      provider: 'anthropic',
      result: { requestCounts: { total: 5, succeeded: 4, failed: 1 } },
    });
    await eventually(() => seen.some((event) => event.data.name === name), 20_000, 'the effect');
    expect(seen.filter((event) => event.data.name === name).map((event) => event.data.state)).toEqual(['SUCCEEDED']);
  });
});
