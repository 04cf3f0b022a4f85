/**
 * OpenAI's and Anthropic's jobs through npm start, as a user has them: the
 * real SDKs (inside Ratchet's reconcile) against fake servers on 127.0.0.1,
 * OpenAI's signed webhooks on POST /webhooks/openai, and every effect
 * delivered to a receiver. OpenAI's deliveries name the job alone: a
 * `batch.completed` before any poll ends the job with its outcome to come,
 * and the poll after it brings the counts as a write of its own
 * (`writeKind: result`, effect `operation.result`). On one machine (SQLite)
 * and on PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RatchetClient } from '../../sdk/client.ts';
import { newSecret } from '../support/deliveries.ts';
import { anthropicBatch, type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { type FakeOpenAI, openaiBatch, openaiDelivery, startFakeOpenAI } from '../support/fake-openai.ts';
import { firstSweepDone, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const HOMES = [
  { label: 'one machine (SQLite)', env: () => ({ DATA_DIR: ':memory:' }) },
  { label: 'PostgreSQL', env: () => ({ DATABASE_URL: inject('postgresUrl'), DATABASE_SCHEMA: `providers_${process.pid}` }) },
];

describe.each(HOMES)('providers on $label', (home) => {
  const outboundSecret = newSecret();
  const openaiSecret = newSecret();
  const azureSecret = newSecret();
  let openai: FakeOpenAI;
  let anthropic: FakeAnthropic;
  let receiver: Receiver;
  let ratchet: RatchetProcess;

  /** The feed's head before anything was written: the changes of every test are read after it. */
  let start: string;

  const untrackedOpenAI = openaiBatch({ status: 'in_progress' });
  const untrackedAnthropic = anthropicBatch({ processing_status: 'in_progress' });

  beforeAll(async () => {
    openai = await startFakeOpenAI();
    anthropic = await startFakeAnthropic();
    // Batches the keys created that nobody tracked: discovery adopts them.
    openai.set('batch', untrackedOpenAI);
    anthropic.set(untrackedAnthropic);
    receiver = await new Receiver(outboundSecret).start();
    ratchet = await startRatchet({
      ...home.env(),
      WEBHOOK_SIGNING_SECRETS: newSecret(),
      OPENAI_API_KEY: 'sk-e2e',
      OPENAI_BASE_URL: openai.url,
      OPENAI_WEBHOOK_SECRET: openaiSecret,
      // Azure OpenAI's webhook (its resource named by the endpoint; nothing there answers a poll).
      AZURE_OPENAI_ENDPOINT: 'http://myresource.invalid',
      AZURE_OPENAI_API_KEY: 'azure-key',
      AZURE_OPENAI_WEBHOOK_SECRET: azureSecret,
      ANTHROPIC_API_KEYS: 'team-a=sk-ant-a,team-b=sk-ant-b',
      ANTHROPIC_BASE_URL: anthropic.url,
      RECONCILE_INTERVAL_SECONDS: '0.3',
      EFFECTS_WEBHOOK_URL: receiver.url,
      EFFECTS_SIGNING_SECRET: outboundSecret,
    });
    start = ((await (await ratchet.api('/changes?wait=0')).json()) as { cursor: string }).cursor;
    // The tests below set a batch at a fake, then track it (201): discovery's first sweep, listing as Ratchet
    // starts, must be over first (each adopts a batch above, so each says so at WARN).
    await firstSweepDone(ratchet, ['openai', 'anthropic']);
  });

  afterAll(async () => {
    await ratchet?.stop();
    await receiver?.stop();
    await openai?.close();
    await anthropic?.close();
  });

  type Operation = {
    name: string;
    kind: string;
    provider: string;
    state: string | null;
    providerState: string | null;
    version: number;
    resultPending?: true;
    result: { requestCounts?: { [count: string]: unknown }; outputFileId?: string } | null;
    credential?: string;
  };
  const get = async (name: string) => (await (await ratchet.api(`/operations/${name}`)).json()) as Operation;
  const post = (path: string, body: unknown) =>
    ratchet.api(path, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const deliver = (delivery: { body: string; headers: { [name: string]: string } }) =>
    fetch(`${ratchet.url}/webhooks/openai`, { method: 'POST', body: delivery.body, headers: delivery.headers });
  const effectsOf = (name: string) => receiver.applied().filter((d) => d.body.data.name === name);

  describe('OpenAI batches through npm start', () => {
    it('ends a batch on a bare batch.completed, then writes its counts from the poll after it, each effect once and in order', async () => {
      const batch = openaiBatch({ status: 'in_progress' });
      const id = batch.id as string;
      const name = `openai/batches/${id}`;
      openai.set('batch', batch);
      const delivery = openaiDelivery(openaiSecret, { type: 'batch.completed', id });
      const answer = await deliver(delivery);
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({
        applied: true,
        operation: { name, provider: 'openai', state: 'SUCCEEDED', resultPending: true },
      });
      // The same delivery again: a duplicate, answered 200 and applied once.
      expect(await (await deliver(delivery)).json()).toMatchObject({ applied: false });
      // Waiting for the job's end waits for its outcome too: the bare end alone does not resolve it.
      const client = new RatchetClient({ url: ratchet.url, token: ratchet.apiToken as string });
      const waited = client.waitFor(name, { timeoutMs: 20_000 });
      let settled = false;
      void waited.finally(() => {
        settled = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(settled).toBe(false);
      // The provider's answer catches up: the poll brings the outcome.
      openai.set('batch', openaiBatch({ id, status: 'completed' }));
      const ended = await waited;
      expect(ended).toMatchObject({ state: 'SUCCEEDED', result: { requestCounts: { total: expect.any(Number) } } });
      expect(ended.resultPending).toBeUndefined();
      const record = await get(name);
      expect(record).toMatchObject({ kind: 'openai-batch', provider: 'openai', state: 'SUCCEEDED', version: 2 });
      expect(record.resultPending).toBeUndefined();
      expect(record.result?.requestCounts).toMatchObject({ total: expect.any(Number), succeeded: expect.any(Number) });
      await eventually(() => effectsOf(name).length === 2, 20_000, 'both effects');
      expect(effectsOf(name).map((d) => [d.body.type, d.body.data.state, (d.body.data as { provider?: string }).provider])).toEqual([
        ['operation.state_changed', 'SUCCEEDED', 'openai'],
        ['operation.result', 'SUCCEEDED', 'openai'],
      ]);
      const changes = (await (await ratchet.api(`/changes?after=${start}&name=${encodeURIComponent(name)}`)).json()) as {
        changes: Array<{ version: number; writeKind: string; provider: string }>;
      };
      expect(changes.changes.map((c) => [c.version, c.writeKind, c.provider])).toEqual([
        [1, 'state-change', 'openai'],
        [2, 'result', 'openai'],
      ]);
    });

    it('keeps the first end when a batch.cancelled races a completed poll, and polls that job no more', async () => {
      const batch = openaiBatch({ status: 'completed' });
      const name = `openai/batches/${batch.id as string}`;
      openai.set('batch', batch);
      expect((await post('/operations', { name })).status).toBe(201);
      await eventually(async () => (await get(name)).state === 'SUCCEEDED', 20_000, 'the poll');
      const answer = await (await deliver(openaiDelivery(openaiSecret, { type: 'batch.cancelled', id: batch.id as string }))).json();
      expect(answer).toMatchObject({ applied: false, reason: 'terminal-conflict', operation: { state: 'SUCCEEDED' } });
      expect((await get(name)).result?.outputFileId).toEqual(expect.any(String));
    });

    it("takes Azure OpenAI deliveries on their own route and secret, naming the batch by the endpoint's resource", async () => {
      const azure = (delivery: { body: string; headers: { [name: string]: string } }) =>
        fetch(`${ratchet.url}/webhooks/azure-openai`, { method: 'POST', body: delivery.body, headers: delivery.headers });
      const answer = await azure(openaiDelivery(azureSecret, { type: 'batch.completed', id: 'batch_azure1' }));
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({
        applied: true,
        operation: { name: 'azure-openai/myresource/batches/batch_azure1', kind: 'azure-openai-batch', provider: 'azure-openai' },
      });
      // OpenAI's secret is not Azure's, and the other way round.
      expect((await azure(openaiDelivery(openaiSecret, { type: 'batch.completed', id: 'batch_azure2' }))).status).toBe(401);
      expect((await deliver(openaiDelivery(azureSecret, { type: 'batch.completed', id: 'batch_azure3' }))).status).toBe(401);
    });

    it("applies an eval run's event (the run's id alone) to the tracked run of that id; one nobody tracked is noted, not guessed", async () => {
      const name = 'openai/evals/eval_abc/runs/evalrun_tracked';
      expect((await post('/operations', { name })).status).toBe(201);
      const applied = await deliver(openaiDelivery(openaiSecret, { type: 'eval.run.succeeded', id: 'evalrun_tracked' }));
      expect(await applied.json()).toMatchObject({ applied: true, operation: { name, kind: 'openai-eval-run', state: 'SUCCEEDED' } });
      const untracked = await deliver(openaiDelivery(openaiSecret, { type: 'eval.run.failed', id: 'evalrun_nobody' }));
      expect(untracked.status).toBe(200);
      expect(await untracked.json()).toMatchObject({ applied: false, reason: 'unknown-event-type' });
      const listed = (await (await ratchet.api('/operations?kind=openai-eval-run&limit=100')).json()) as { operations: Operation[] };
      expect(listed.operations.some((o) => o.name.endsWith('/evalrun_nobody'))).toBe(false);
    });

    it('refuses a delivery not signed with OPENAI_WEBHOOK_SECRET, and answers an unknown type 200 without a write', async () => {
      const forged = openaiDelivery(newSecret(), { type: 'batch.completed', id: 'batch_forged' });
      expect((await deliver(forged)).status).toBe(401);
      expect((await ratchet.api('/operations/openai/batches/batch_forged')).status).toBe(404);
      const unknown = await deliver(openaiDelivery(openaiSecret, { type: 'realtime.call.incoming', id: 'rtc_1' }));
      expect(answerOf((await unknown.json()) as { reason?: string })).toEqual({ status: 200, reason: 'unknown-event-type' });
    });
  });

  const answerOf = (body: { reason?: string }) => ({ status: 200, reason: body.reason });

  it('adopts the OpenAI and Anthropic batches its keys created that nobody tracked (discovery, per provider)', async () => {
    const openaiName = `openai/batches/${untrackedOpenAI.id as string}`;
    const anthropicName = `anthropic/messages/batches/${untrackedAnthropic.id as string}`;
    await eventually(async () => (await ratchet.api(`/operations/${openaiName}`)).status === 200, 20_000, 'the OpenAI batch adopted');
    await eventually(async () => (await ratchet.api(`/operations/${anthropicName}`)).status === 200, 20_000, 'the Anthropic batch adopted');
    expect(await get(openaiName)).toMatchObject({ provider: 'openai', state: 'RUNNING', providerState: 'in_progress' });
    expect(await get(anthropicName)).toMatchObject({ provider: 'anthropic', state: 'RUNNING', providerState: 'in_progress' });
  });

  describe('Anthropic batches through npm start', () => {
    it('follows a batch by polling with the key its credential names, its ended outcome read from the counts', async () => {
      const batch = anthropicBatch({ processing_status: 'in_progress' });
      const id = batch.id as string;
      const name = `anthropic/messages/batches/${id}`;
      anthropic.set(batch);
      expect((await post('/operations', { name, credential: 'team-b' })).status).toBe(201);
      await eventually(async () => (await get(name)).state === 'RUNNING', 20_000, 'the first poll');
      const ended = anthropicBatch({
        id,
        processing_status: 'ended',
        request_counts: { processing: 0, succeeded: 0, errored: 0, canceled: 3, expired: 0 },
      });
      anthropic.set(ended);
      await eventually(async () => (await get(name)).state === 'CANCELLED', 20_000, 'the end');
      expect(await get(name)).toMatchObject({
        provider: 'anthropic',
        credential: 'team-b',
        providerState: 'ended',
        result: { requestCounts: { total: 3, succeeded: 0, failed: 0, canceled: 3, expired: 0 } },
      });
      expect(anthropic.requests.filter((r) => r.path.endsWith(id)).every((r) => r.apiKey === 'sk-ant-b')).toBe(true);
      // A label no ANTHROPIC_API_KEYS key has is refused at the door.
      expect((await post('/operations', { name: 'anthropic/messages/batches/msgbatch_x', credential: 'team-c' })).status).toBe(400);
    });

    it('names a key Anthropic refuses in /healthz, by provider and label, never the key; the other key polls on', async () => {
      anthropic.refuse('sk-ant-a');
      const batch = anthropicBatch({ processing_status: 'in_progress' });
      const name = `anthropic/messages/batches/${batch.id as string}`;
      anthropic.set(batch);
      expect((await post('/operations', { name, credential: 'team-a' })).status).toBe(201);
      await eventually(
        async () => ((await (await fetch(`${ratchet.url}/healthz`)).json()) as { providerKeys?: unknown }).providerKeys !== undefined,
        20_000,
        'the refusal',
      );
      const health = await (await fetch(`${ratchet.url}/healthz`)).text();
      expect(JSON.parse(health)).toMatchObject({
        status: 'ok',
        providerKeys: { anthropic: { refused: [{ label: 'team-a', status: 401 }] } },
      });
      expect(health).not.toContain('sk-ant');
      expect((await get(name)).state).toBeNull();
    });

    it('lists by provider, in the API and the change feed', async () => {
      const listed = (await (await ratchet.api('/operations?provider=anthropic')).json()) as { operations: Operation[] };
      expect(listed.operations.length).toBeGreaterThan(0);
      expect(listed.operations.every((o) => o.provider === 'anthropic')).toBe(true);
      const feed = (await (await ratchet.api(`/changes?after=${start}&provider=openai`)).json()) as {
        changes: Array<{ provider: string }>;
      };
      expect(feed.changes.length).toBeGreaterThan(0);
      expect(feed.changes.every((c) => c.provider === 'openai')).toBe(true);
      expect((await ratchet.api('/operations?provider=nobody')).status).toBe(400);
    });
  });
});
