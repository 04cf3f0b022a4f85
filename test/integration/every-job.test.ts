/**
 * Every Gemini job as @google/genai 3.6.1 declares it, through the real SDK
 * against the fake on 127.0.0.1, into each engine's store: File Search
 * imports and uploads, Agent Platform tuning jobs, a batch's request counts
 * and an interaction's token usage in the result, and `idle` (or a status no
 * Ratchet knows yet) never blinding reconcile.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReconcileStats, reconcile } from '../../app/reconcile/reconcile.ts';
import { kindOfName, normalizeOperationName } from '../../core/names.ts';
import { DEFAULT_OVERDUE_AFTER, type OverdueLimits, overdueLimitsOf } from '../../core/overdue.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import { GenAiPoller } from '../../providers/gemini/poller.ts';
import { ENGINES, type FullStore, type StoreUnderTest } from '../support/engines.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { silentLogger } from '../support/silent-logger.ts';

const SCOPE = 'projects/ratchet-tests/locations/us-central1';

let gemini: FakeGemini;
let poller: GenAiPoller;
let store: FullStore;
let now = new Date('2026-12-01T00:00:00Z');
let run = 0;

beforeAll(async () => {
  gemini = await new FakeGemini().start();
  poller = new GenAiPoller({
    gemini: { apiKey: gemini.apiKey, baseUrl: gemini.baseUrl },
    platform: { project: 'ratchet-tests', location: 'us-central1', apiKey: gemini.platformApiKey, baseUrl: gemini.baseUrl },
    timeoutMs: 2_000,
  });
});
afterAll(() => gemini.stop());

const reconcileOnce = (overdueAfter?: OverdueLimits): Promise<ReconcileStats> => {
  now = new Date(now.getTime() + 3 * 3600_000);
  return reconcile({
    store,
    poller,
    logger: silentLogger,
    clock: () => now,
    intervalSeconds: 60,
    budgetMs: 60_000,
    ...(overdueAfter && { overdueAfter }),
  });
};
const track = (name: string) => store.write(trackedRecord(name, kindOfName(name), timeFromDate(now)), undefined);
const pollOf = async (name: string) => (await store.claimDue('9999', 10_000)).find((c) => c.record.name === name)?.poll;

describe('the names of the new kinds', () => {
  it.each([
    ['fileSearchStores/docs-1/operations/imp-2', 'file-search'],
    ['fileSearchStores/docs-1/upload/operations/up-3', 'file-search'],
    [`${SCOPE}/tuningJobs/123`, 'platform-tuning'],
  ])('reads %s as a %s', (name, kind) => {
    expect(kindOfName(normalizeOperationName(name))).toBe(kind);
  });

  it.each([
    'fileSearchStores/../operations/x',
    'fileSearchStores/docs/operations/..',
    'fileSearchStores/docs%2F/operations/x',
    'fileSearchStores/docs/operations/x:cancel',
    'fileSearchStores/docs/download/operations/x',
    'fileSearchStores//operations/x',
    `${SCOPE}/tuningJobs/..`,
    `${SCOPE}/tuningJobs/1:cancel`,
    `${SCOPE}/tuningJobs/1%3F`,
    'projects/p/locations/../tuningJobs/1',
  ])('refuses %s', (name) => {
    expect(() => normalizeOperationName(name)).toThrow(/not an operation name/);
  });
});

describe.each(ENGINES)('every job, on $label', (engine) => {
  let subject: StoreUnderTest;
  beforeAll(async () => {
    subject = await engine.open('every-job');
    store = subject.store;
  });
  afterAll(() => subject.close());

  it('polls File Search imports and uploads with GET {name}: done with a response SUCCEEDED (the response kept), with an error FAILED', async () => {
    run++;
    const imported = `fileSearchStores/docs-${run}/operations/imp-${run}`;
    const uploaded = `fileSearchStores/docs-${run}/upload/operations/up-${run}`;
    for (const name of [imported, uploaded]) {
      await track(name);
      gemini.operations.set(name, { done: false });
    }
    await reconcileOnce();
    expect((await store.get(imported))?.state).toBe('RUNNING');
    expect((await store.get(uploaded))?.state).toBe('RUNNING');
    const response = {
      '@type': 'type.googleapis.com/google.ai.generativelanguage.v1main.ImportFileResponse',
      parent: `fileSearchStores/docs-${run}`,
      documentName: `fileSearchStores/docs-${run}/documents/report-${run}`,
    };
    gemini.operations.set(imported, { done: true, response });
    gemini.operations.set(uploaded, { done: true, error: { code: 3, message: 'unsupported mime type' } });
    await reconcileOnce();
    expect(await store.get(imported)).toMatchObject({
      kind: 'file-search',
      state: 'SUCCEEDED',
      providerState: 'DONE',
      result: { response },
    });
    expect(await store.get(uploaded)).toMatchObject({
      kind: 'file-search',
      state: 'FAILED',
      providerState: 'DONE_ERROR',
      result: { error: { code: 3, message: 'unsupported mime type' } },
    });
    // Asked at Gemini's own path for each, nothing else.
    expect(gemini.requests).toContain(imported);
    expect(gemini.requests).toContain(uploaded);
  });

  it('polls an Agent Platform tuning job with tunings.get through its JobState, the tuned model in the result', async () => {
    run++;
    const name = `${SCOPE}/tuningJobs/${7000 + run}`;
    const failed = `${SCOPE}/tuningJobs/${8000 + run}`;
    await track(name);
    await track(failed);
    const states: Array<string | null | undefined> = [];
    for (const [minute, state] of [
      [1, 'JOB_STATE_PENDING'],
      [2, 'JOB_STATE_RUNNING'],
      [3, 'JOB_STATE_SUCCEEDED'],
    ] as const) {
      gemini.tuningJobs.set(name, {
        state,
        updateTime: `2026-11-30T10:0${minute}:00Z`,
        ...(state === 'JOB_STATE_SUCCEEDED' && {
          tunedModel: { model: `${SCOPE}/models/tuned-${run}`, endpoint: `${SCOPE}/endpoints/e-${run}` },
        }),
      });
      gemini.tuningJobs.set(failed, {
        state: 'JOB_STATE_FAILED',
        updateTime: '2026-11-30T10:05:00Z',
        error: { code: 9, message: 'bad data' },
      });
      await reconcileOnce();
      states.push((await store.get(name))?.state);
    }
    expect(states).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED']);
    expect(await store.get(name)).toMatchObject({
      kind: 'platform-tuning',
      providerState: 'JOB_STATE_SUCCEEDED',
      updateTime: '2026-11-30T10:03:00.000000000Z',
      result: { tunedModel: { model: `${SCOPE}/models/tuned-${run}`, endpoint: `${SCOPE}/endpoints/e-${run}` } },
    });
    expect(await store.get(failed)).toMatchObject({ state: 'FAILED', result: { error: { code: 9, message: 'bad data' } } });
  });

  it("keeps what a job cost: a batch's request counts as they grow, an interaction's token usage", async () => {
    run++;
    const batch = `batches/cost-${run}`;
    const interaction = `interactions/cost-${run}`;
    await track(batch);
    await track(interaction);
    gemini.batches.set(batch, {
      state: 'BATCH_STATE_RUNNING',
      updateTime: '2026-11-30T10:01:00Z',
      batchStats: { requestCount: '10', pendingRequestCount: '10' },
    });
    gemini.interactions.set(interaction, { status: 'in_progress', updated: '2026-11-30T10:01:00Z' });
    await reconcileOnce();
    expect((await store.get(batch))?.result).toEqual({ batchStats: { requestCount: 10, pendingRequestCount: 10 } });
    gemini.batches.set(batch, {
      state: 'BATCH_STATE_SUCCEEDED',
      updateTime: '2026-11-30T10:09:00Z',
      batchStats: { requestCount: '10', successfulRequestCount: '9', failedRequestCount: '1', pendingRequestCount: '0' },
    });
    gemini.interactions.set(interaction, {
      status: 'completed',
      updated: '2026-11-30T10:02:00Z',
      usage: { total_input_tokens: 1200, total_output_tokens: 340, total_tokens: 1540, total_thought_tokens: 80 },
    });
    await reconcileOnce();
    expect(await store.get(batch)).toMatchObject({
      state: 'SUCCEEDED',
      providerState: 'JOB_STATE_SUCCEEDED',
      result: { batchStats: { requestCount: 10, successfulRequestCount: 9, failedRequestCount: 1, pendingRequestCount: 0 } },
    });
    expect(await store.get(interaction)).toMatchObject({
      state: 'SUCCEEDED',
      result: { usage: { inputTokens: 1200, outputTokens: 340, totalTokens: 1540, thoughtTokens: 80 } },
    });
  });

  it('reads a failed Gemini API batch with the error its operation carries (the SDK would drop it)', async () => {
    run++;
    const name = `batches/broken-${run}`;
    await track(name);
    gemini.batches.set(name, { state: 'BATCH_STATE_FAILED', updateTime: '2026-11-30T10:01:00Z', error: { code: 3, message: 'bad jsonl' } });
    await reconcileOnce();
    expect(await store.get(name)).toMatchObject({ state: 'FAILED', result: { error: { code: 3, message: 'bad jsonl' } } });
  });

  it('`idle` is open (REQUIRES_ACTION, raw kept) and polled on; a status nobody knows keeps the state, fails no poll, names the value', async () => {
    run++;
    const idle = `interactions/idle-${run}`;
    const strange = `interactions/strange-${run}`;
    await track(idle);
    await track(strange);
    gemini.interactions.set(idle, { status: 'in_progress', updated: '2026-11-30T10:01:00Z' });
    gemini.interactions.set(strange, { status: 'in_progress', updated: '2026-11-30T10:01:00Z' });
    await reconcileOnce();
    gemini.interactions.set(idle, { status: 'idle', updated: '2026-11-30T10:02:00Z' });
    gemini.interactions.set(strange, { status: 'daydreaming', updated: '2026-11-30T10:02:00Z' });
    const stats = await reconcileOnce();
    expect(stats.unknownStates).toBe(1);
    expect(stats.failed).toBe(0);
    expect(await store.get(idle)).toMatchObject({ state: 'REQUIRES_ACTION', providerState: 'idle' });
    expect(await store.get(strange)).toMatchObject({ state: 'RUNNING', providerState: 'in_progress', version: 2 });
    expect(await pollOf(strange)).toMatchObject({ failedPolls: 0, unchangedPolls: 1 });
    expect((await subject.store.describe(strange))?.polling).toMatchObject({ note: 'unknown-state:daydreaming', failedPolls: 0 });
    expect((await subject.store.describe(strange))?.polling.nextPollAt).not.toBeNull();
    // Polled on: the next answer it understands moves it, and the note goes.
    const before = gemini.requests.filter((r) => r === strange).length;
    gemini.interactions.set(strange, { status: 'completed', updated: '2026-11-30T10:03:00Z' });
    gemini.interactions.set(idle, { status: 'completed', updated: '2026-11-30T10:03:00Z' });
    await reconcileOnce();
    expect(gemini.requests.filter((r) => r === strange).length).toBe(before + 1);
    expect((await store.get(strange))?.state).toBe('SUCCEEDED');
    expect((await store.get(idle))?.state).toBe('SUCCEEDED');
  });

  it('marks a job open past its kind’s limit overdue once, as a write of its own before the change that ends it; lists it while open', async () => {
    run++;
    const late = `interactions/late-${run}`;
    const prompt = `interactions/prompt-${run}`;
    await track(late);
    await track(prompt);
    gemini.interactions.set(late, { status: 'in_progress', updated: '2026-11-30T10:01:00Z' });
    gemini.interactions.set(prompt, { status: 'in_progress', updated: '2026-11-30T10:01:00Z' });
    // Each run moves the clock 3 h: past a 4 h limit on the second run, never past the default batch one.
    const limits = overdueLimitsOf('interaction=4h') as OverdueLimits;
    expect((await reconcileOnce(limits)).overdue).toBe(0);
    expect((await store.get(late))?.overdue).toBeUndefined();
    const second = await reconcileOnce(limits);
    expect(second.overdue).toBeGreaterThanOrEqual(2);
    expect(await store.get(late)).toMatchObject({
      state: 'RUNNING',
      version: 3,
      source: 'overdue',
      stateChanged: false,
      overdue: { afterSeconds: 4 * 3600 },
    });
    const listed = async () => (await store.list({ overdue: true, limit: 100 })).operations.map((o) => o.name);
    expect(await listed()).toEqual(expect.arrayContaining([late, prompt]));
    // The console's counts (the SQL engines'): the open overdue jobs counted in their state and kind.
    const counted = async () => {
      const counts = (store as { counts?: () => unknown }).counts;
      if (!counts) return undefined;
      const rows = (await counts.call(store)) as Array<{ state: string | null; kind: string; overdue: number }>;
      return rows.filter((row) => row.kind === 'interaction' && row.state === 'RUNNING').reduce((n, row) => n + Number(row.overdue), 0);
    };
    if (engine.label !== 'DynamoDB') expect(await counted()).toBeGreaterThanOrEqual(2);
    // Once per job: later runs mark nothing more.
    await reconcileOnce(limits);
    expect((await store.get(late))?.version).toBe(3);
    gemini.interactions.set(late, { status: 'completed', updated: '2026-11-30T10:09:00Z' });
    await reconcileOnce(limits);
    expect(await store.get(late)).toMatchObject({ state: 'SUCCEEDED', version: 4, overdue: { afterSeconds: 4 * 3600 } });
    expect(await listed()).not.toContain(late);
    expect(await listed()).toContain(prompt);
    if (engine.label !== 'DynamoDB') {
      const ended = (
        await (store as unknown as { counts: () => Promise<Array<{ state: string | null; kind: string; overdue: number }>> }).counts()
      )
        .filter((row) => row.kind === 'interaction' && row.state === 'SUCCEEDED')
        .reduce((n, row) => n + Number(row.overdue), 0);
      expect(ended).toBe(0); // an ended job is no longer counted overdue
    }
    // The engine's change feed: the mark is an `overdue` write, between the first state and the end.
    const changes = (await subject.changes()).filter((change) => change.name === late);
    expect(changes.map((change) => [change.version, change.stateChanged])).toEqual([
      [1, false],
      [2, true],
      [3, false],
      [4, true],
    ]);
  });

  it('marks nothing past the default limits of another kind, nor a job never observed', async () => {
    run++;
    const tracked = `batches/unseen-${run}`;
    await track(tracked);
    gemini.faults.set(tracked, '404');
    await reconcileOnce({ ...DEFAULT_OVERDUE_AFTER, batch: 1 });
    expect((await store.get(tracked))?.overdue).toBeUndefined();
    gemini.faults.delete(tracked);
  });
});
