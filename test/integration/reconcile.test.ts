/**
 * Reconcile against each engine's store (a SQLite file, a moto table
 * of its own) and a fake Gemini on 127.0.0.1, through the real @google/genai SDK.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ingest } from '../../app/ingest.ts';
import { type ReconcileStats, reconcile } from '../../app/reconcile/reconcile.ts';
import { DISABLED_STATE, WebhookHealth } from '../../app/reconcile/webhook-health.ts';
import { kindOfName } from '../../core/names.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import { SqliteOperationStore } from '../../engines/sqlite/operation-store.ts';
import { GenAiPoller } from '../../providers/gemini/poller.ts';
import { mapWebhookDelivery } from '../../providers/gemini/webhook.ts';
import { envelope } from '../support/deliveries.ts';
import { ENGINES, type FullStore, type StoreUnderTest } from '../support/engines.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { eventually } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

let store: FullStore;
let gemini: FakeGemini;
let poller: GenAiPoller;
// Reconcile's clock: each run jumps ahead so every backed-off operation is due again.
let now = new Date('2026-12-01T00:00:00Z');
let run = 0;

beforeAll(async () => {
  gemini = await new FakeGemini().start();
  poller = new GenAiPoller({ gemini: { apiKey: gemini.apiKey, baseUrl: gemini.baseUrl }, timeoutMs: 1_000 });
});
afterAll(async () => {
  await gemini.stop();
});
beforeEach(() => {
  run++;
});

const reconcileOnce = (options: { budgetMs?: number; unseenExpiryMs?: number } = {}): Promise<ReconcileStats> => {
  now = new Date(now.getTime() + 3 * 3600_000);
  return reconcile({
    store,
    poller,
    logger: silentLogger,
    clock: () => now,
    intervalSeconds: 60,
    budgetMs: options.budgetMs ?? 60_000,
    ...(options.unseenExpiryMs && { unseenExpiryMs: options.unseenExpiryMs }),
  });
};
const track = (name: string) => store.write(trackedRecord(name, kindOfName(name), timeFromDate(now)), undefined);
const stateOf = async (name: string) => (await store.get(name))?.state;
const at = (minute: number) => `2026-11-30T10:${String(minute).padStart(2, '0')}:00.000001Z`;

describe.each(ENGINES)('reconcile on $label', (engine) => {
  let subject: StoreUnderTest;
  beforeAll(async () => {
    subject = await engine.open('reconcile');
    store = subject.store;
  });
  afterAll(() => subject.close());

  it('with polling alone (every webhook lost), every operation reaches its true terminal state', async () => {
    const batches = Array.from({ length: 6 }, (_, i) => `batches/lost-${run}-${i}`);
    const videos = Array.from({ length: 3 }, (_, i) => `models/veo-3.0-generate-001/operations/lost-${run}-${i}`);
    const generic = `operations/lost-${run}`;
    for (const name of [...batches, ...videos, generic]) await track(name);
    const finals = [
      'BATCH_STATE_SUCCEEDED',
      'BATCH_STATE_FAILED',
      'BATCH_STATE_CANCELLED',
      'BATCH_STATE_EXPIRED',
      'JOB_STATE_PARTIALLY_SUCCEEDED',
      'BATCH_STATE_SUCCEEDED',
    ];

    // Time passes at Gemini: pending, running, then done, one step per run.
    const steps: Array<() => void> = [
      () => {
        for (const name of batches) gemini.batches.set(name, { state: 'BATCH_STATE_PENDING', updateTime: at(1) });
        for (const name of [...videos, generic]) gemini.operations.set(name, { done: false });
      },
      () => {
        for (const name of batches) gemini.batches.set(name, { state: 'BATCH_STATE_RUNNING', updateTime: at(2) });
      },
      () => {
        batches.forEach((name, i) => {
          gemini.batches.set(name, { state: finals[i] as string, updateTime: at(3) });
        });
        gemini.operations.set(videos[0] as string, {
          done: true,
          response: { generateVideoResponse: { generatedSamples: [{ video: { uri: 'https://v/0.mp4' } }] } },
        });
        gemini.operations.set(videos[1] as string, { done: true, error: { code: 13, message: 'render failed' } });
        gemini.operations.set(videos[2] as string, { done: true, error: { code: 1, message: 'cancelled' } });
        gemini.operations.set(generic, { done: true, response: {} });
      },
    ];
    const seen: string[] = [];
    for (const step of steps) {
      step();
      await reconcileOnce();
      seen.push(String(await stateOf(batches[0] as string)));
    }
    expect(seen).toEqual(['PENDING', 'RUNNING', 'SUCCEEDED']);
    expect(await Promise.all(batches.map(stateOf))).toEqual(['SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED', 'SUCCEEDED', 'SUCCEEDED']);
    expect(await Promise.all(videos.map(stateOf))).toEqual(['SUCCEEDED', 'FAILED', 'CANCELLED']);
    expect(await stateOf(generic)).toBe('SUCCEEDED');
    expect((await store.get(videos[0] as string))?.result).toEqual({ outputUri: 'https://v/0.mp4' });
    expect((await store.get(batches[4] as string))?.providerState).toBe('JOB_STATE_PARTIALLY_SUCCEEDED');

    // Terminal operations leave the index: nothing of this test is polled again.
    const before = gemini.requests.length;
    await reconcileOnce();
    expect(gemini.requests.slice(before).filter((r) => r.includes(`lost-${run}`))).toEqual([]);
  });

  /**
   * A poll reads `polled` at Gemini and is held there; meanwhile the job's
   * SUCCEEDED webhook is applied; then the poll answers with what it read.
   */
  async function pollOvertakenBySucceededWebhook(name: string, polled: string, minute: number) {
    await track(name);
    gemini.batches.set(name, { state: polled, updateTime: at(minute) });
    gemini.holding.add(name);
    const polling = reconcileOnce();
    await eventually(() => gemini.requests.includes(name), 10_000, 'the poll to reach Gemini');
    const webhook = mapWebhookDelivery(envelope('batch.succeeded', { id: name }, at(minute + 1)), `msg_${name}`);
    if (webhook.kind !== 'event') throw new Error('expected an event');
    expect((await ingest(webhook.event, { store })).outcome).toBe('applied');
    gemini.release(name);
    return polling;
  }

  it('the seed race: a poll that read RUNNING lands after the SUCCEEDED webhook, and the state stays SUCCEEDED', async () => {
    const name = `batches/race-${run}`;
    const stats = await pollOvertakenBySucceededWebhook(name, 'BATCH_STATE_RUNNING', 5);
    expect(stats.unchanged).toBeGreaterThanOrEqual(1);
    expect(await store.get(name)).toMatchObject({ state: 'SUCCEEDED', providerState: 'batch.succeeded', version: 2 });
  });

  it('surfaces a poll that reports a different terminal state than the stored one, and keeps the first', async () => {
    const name = `batches/conflict-${run}`;
    const stats = await pollOvertakenBySucceededWebhook(name, 'BATCH_STATE_FAILED', 7);
    expect(stats.conflicts).toBe(1);
    expect(await store.get(name)).toMatchObject({ state: 'SUCCEEDED', version: 2 });
  });

  it('survives 429, 500, slow and malformed answers: no crash, no wrong state, done on a later run', async () => {
    const faults = ['429', '500', 'slow', 'malformed'] as const;
    const names = faults.map((fault) => `batches/fault-${fault}-${run}`);
    const healthy = `batches/healthy-${run}`;
    for (const name of [...names, healthy]) {
      await track(name);
      gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: at(7) });
    }
    names.forEach((name, i) => {
      gemini.faults.set(name, faults[i] as (typeof faults)[number]);
    });
    const stats = await reconcileOnce();
    expect(stats.failed).toBeGreaterThanOrEqual(4);
    expect(await Promise.all(names.map(stateOf))).toEqual([null, null, null, null]);
    expect(await stateOf(healthy)).toBe('SUCCEEDED'); // one operation's error never stops the others

    for (const name of names) gemini.faults.delete(name);
    await reconcileOnce();
    expect(await Promise.all(names.map(stateOf))).toEqual(['SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED', 'SUCCEEDED']);
  });

  it('stops polling an operation Gemini answers 404 for, three times in a row', async () => {
    const name = `batches/gone-${run}`;
    await track(name);
    const polls = () => gemini.requests.filter((r) => r === name).length;
    for (let i = 1; i <= 3; i++) {
      await reconcileOnce();
      expect(polls()).toBe(i);
    }
    await reconcileOnce();
    expect(polls()).toBe(3);
    expect(await store.get(name)).toMatchObject({ state: null, version: 1 });
  });

  it('stops polling, without a poll, what was tracked and never observed past the expiry; what was observed is polled on', async () => {
    const unseen = `batches/unseen-${run}`;
    const seen = `batches/seen-${run}`;
    await track(unseen);
    await track(seen);
    gemini.batches.set(seen, { state: 'BATCH_STATE_RUNNING', updateTime: at(1) });
    // Gemini answers 500 for the unseen one: neither 404's nor anything else's rule stops its polling.
    gemini.faults.set(unseen, '500');
    const polls = (name: string) => gemini.requests.filter((r) => r === name).length;
    const expiry = 5 * 3600_000;
    expect((await reconcileOnce({ unseenExpiryMs: expiry })).expired).toBe(0); // 3 h after tracking
    const polledWhileYoung = polls(unseen); // the SDK may retry a 500 within one poll
    expect(polledWhileYoung).toBeGreaterThan(0);
    expect(polls(seen)).toBe(1);
    expect((await reconcileOnce({ unseenExpiryMs: expiry })).expired).toBe(1); // 6 h: past the expiry
    expect((await reconcileOnce({ unseenExpiryMs: expiry })).expired).toBe(0); // never due again
    expect(polls(unseen)).toBe(polledWhileYoung);
    expect(polls(seen)).toBe(3);
    expect(await store.get(unseen)).toMatchObject({ state: null, version: 1 });
    expect(await store.get(seen)).toMatchObject({ state: 'RUNNING' });
    if (store instanceof SqliteOperationStore) {
      // The embedded engine deletes it at twice the expiry (hourly maintenance), and only it.
      store.deleteUnseen(2 * expiry, now.getTime() - 2 * 3600_000); // 7 h after tracking (the 404s of earlier tests may go)
      expect(await store.get(unseen)).toMatchObject({ state: null });
      expect(store.deleteUnseen(2 * expiry, now.getTime() + 3 * 3600_000)).toBeGreaterThanOrEqual(1); // 12 h
      expect(await store.get(unseen)).toBeUndefined();
      expect(await store.get(seen)).toMatchObject({ state: 'RUNNING' });
    }
  });

  it('polls interactions through interactions.get: every status mapped, the raw one kept, unknown ones never guessed', async () => {
    const statuses = [
      'completed',
      'failed',
      'budget_exceeded',
      'incomplete',
      'cancelled',
      'requires_action',
      'in_progress',
      'queued',
      'idle',
    ];
    const names = statuses.map((status) => `interactions/int-${run}-${status}`);
    for (const name of names) await track(name);
    statuses.forEach((status, i) => {
      gemini.interactions.set(names[i] as string, { status, updated: '2026-11-30T10:00:05Z' });
    });
    const unknown = `interactions/int-${run}-unknown`;
    await track(unknown);
    gemini.interactions.set(unknown, { status: 'paused_for_lunch', updated: '2026-11-30T10:00:05Z' });
    const stats = await reconcileOnce();
    expect(stats.unknownStates).toBe(1);
    expect(await Promise.all(names.map(stateOf))).toEqual([
      'SUCCEEDED',
      'FAILED',
      'FAILED',
      'FAILED',
      'CANCELLED',
      'REQUIRES_ACTION',
      'RUNNING',
      'PENDING',
      'REQUIRES_ACTION',
    ]);
    expect(await store.get(names[8] as string)).toMatchObject({ state: 'REQUIRES_ACTION', providerState: 'idle' });
    expect(await store.get(names[3] as string)).toMatchObject({
      providerState: 'incomplete',
      updateTime: '2026-11-30T10:00:05.000000000Z',
      result: { error: { status: 'INCOMPLETE' } },
    });
    expect(await stateOf(unknown)).toBeNull();
    const [candidate] = (await store.claimDue('9999', 10_000)).filter((c) => c.record.name === unknown);
    // Not a failure: no failed poll, polled on at an unchanged job's pace, the value named.
    expect(candidate?.poll).toMatchObject({ failedPolls: 0, unchangedPolls: 1 });
    // An answer within the same second at the same rank never overrides: the second has no sub-second digits.
    gemini.interactions.set(names[6] as string, { status: 'requires_action', updated: '2026-11-30T10:00:05Z' });
    await reconcileOnce();
    expect(await stateOf(names[6] as string)).toBe('RUNNING');
  });

  it("retries an interaction's 404 right after creation instead of giving it up, and finds it", async () => {
    const name = `interactions/young-${run}`;
    await store.write(trackedRecord(name, 'interaction', timeFromDate(now)), undefined);
    // Reconcile's clock moves 3 h per run: keep it within the grace by running with a clock just after creation.
    const created = now.getTime();
    for (let minute = 1; minute <= 5; minute++) {
      const clock = () => new Date(created + minute * 60_000);
      const stats = await reconcile({ store, poller, logger: silentLogger, clock, intervalSeconds: 1, budgetMs: 60_000 });
      expect(stats.notFound).toBeGreaterThanOrEqual(1);
    }
    // Five 404s, none counted: three would have stopped an older operation's polling.
    const [candidate] = (await store.claimDue('9999', 10_000)).filter((c) => c.record.name === name);
    expect(candidate?.poll.notFoundPolls).toBe(0);
    gemini.interactions.set(name, { status: 'completed', updated: '2026-11-30T10:10:00Z' });
    await reconcileOnce();
    expect(await stateOf(name)).toBe('SUCCEEDED');
  });

  it('records a Veo video the safety filters blocked as FAILED, with the reasons', async () => {
    const name = `models/veo-3.0-generate-001/operations/filtered-${run}`;
    await track(name);
    gemini.operations.set(name, {
      done: true,
      response: { generateVideoResponse: { raiMediaFilteredCount: 1, raiMediaFilteredReasons: ['celebrity likeness'] } },
    });
    await reconcileOnce();
    expect(await store.get(name)).toMatchObject({
      state: 'FAILED',
      providerState: 'DONE_FILTERED',
      result: { error: { status: 'FILTERED' }, filtered: { count: 1, reasons: ['celebrity likeness'] } },
    });
  });

  it('stops taking new polls at its deadline and leaves the rest due for the next run', async () => {
    const names = Array.from({ length: 3 }, (_, i) => `batches/budget-${run}-${i}`);
    for (const name of names) {
      await track(name);
      gemini.batches.set(name, { state: 'BATCH_STATE_RUNNING', updateTime: at(9) });
    }
    const stats = await reconcileOnce({ budgetMs: -1 });
    expect(stats.polled).toBe(0);
    expect(stats.deferred).toBeGreaterThanOrEqual(3);
    await reconcileOnce();
    expect(await Promise.all(names.map(stateOf))).toEqual(['RUNNING', 'RUNNING', 'RUNNING']);
  });

  it('never sends a name that is not a resource name of its kind (a record written before the edge checked), and stops polling it', async () => {
    // Written past the edge, as an older version could have: the poller is the second line of defence.
    const bad = [`batches/../files/x${run}`, `models/veo/operations/../../../files/y${run}`, `batches/ok${run}/..`];
    await store.write(trackedRecord(bad[0] as string, 'batch', timeFromDate(now)), undefined);
    await store.write(trackedRecord(bad[1] as string, 'video', timeFromDate(now)), undefined);
    await store.write(trackedRecord(bad[2] as string, 'batch', timeFromDate(now)), undefined);
    const before = gemini.requests.length;
    const stats = await reconcileOnce();
    expect(stats.refused).toBe(3);
    expect(gemini.requests.slice(before).filter((path) => path.includes('files/') || path.includes(`ok${run}`))).toEqual([]);
    for (const name of bad) expect((await store.get(name))?.state).toBeNull();
    expect((await reconcileOnce()).refused).toBe(0); // polling stopped: never due again
  });

  it('reports the age of the oldest open operation it saw (the stuck-jobs metric)', async () => {
    const name = `batches/old-${run}`;
    await track(name);
    gemini.batches.set(name, { state: 'BATCH_STATE_RUNNING', updateTime: at(1) });
    const stats = await reconcileOnce(); // three hours later
    expect(stats.oldestOpenAgeSeconds).toBeGreaterThanOrEqual(3 * 3600);
  });

  it('pollNow makes an operation due again, even one whose polling stopped; a terminal or unknown one is left alone', async () => {
    const name = `batches/again-${run}`;
    await track(name);
    for (let i = 0; i < 3; i++) await reconcileOnce(); // 404 three times: polling stopped
    const polls = () => gemini.requests.filter((r) => r === name).length;
    expect(polls()).toBe(3);
    gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: at(9) });
    expect(await store.pollNow(name, timeFromDate(now))).toBe(true);
    await reconcileOnce();
    expect(polls()).toBe(4);
    expect(await store.get(name)).toMatchObject({ state: 'SUCCEEDED', source: 'poll' });
    expect(await store.pollNow(name, timeFromDate(now))).toBe(false); // terminal: nothing to poll
    expect(await store.pollNow(`batches/never-${run}`, timeFromDate(now))).toBe(false);
    expect(await store.get(`batches/never-${run}`)).toBeUndefined();
  });

  it('counts the Gemini webhooks pointing here that Gemini disabled, at most once an hour (webhooks.list through the SDK)', async () => {
    const mine = `https://ratchet-${run}.example/webhooks/gemini`;
    const hook = (id: string, uri: string, state: string) =>
      gemini.webhooks.set(id, {
        id,
        uri,
        state,
        subscribed_events: ['batch.succeeded'],
        secrets: [],
        create_time: at(0),
        update_time: at(0),
      });
    hook(`wh-mine-${run}`, mine, DISABLED_STATE);
    hook(`wh-other-${run}`, 'https://someone-else.example/hook', DISABLED_STATE);
    let clock = Date.parse('2026-12-01T00:00:00Z');
    const health = new WebhookHealth({ webhooks: poller.webhooks, webhookUrl: mine, logger: silentLogger, clock: () => clock });
    const listed = () => gemini.requests.filter((r) => r === 'webhooks').length;
    const before = listed();
    const runWith = () =>
      reconcile({ store, poller, health, logger: silentLogger, clock: () => now, intervalSeconds: 60, budgetMs: 60_000 });
    expect((await runWith()).webhooksDisabled).toBe(1);
    (gemini.webhooks.get(`wh-mine-${run}`) as { state: string }).state = 'enabled';
    clock += 30 * 60_000;
    expect((await runWith()).webhooksDisabled).toBe(1); // the last count, reported again until the next check
    expect(listed() - before).toBe(1);
    clock += 31 * 60_000;
    expect((await runWith()).webhooksDisabled).toBe(0);
    expect(listed() - before).toBe(2);
    for (const id of [`wh-mine-${run}`, `wh-other-${run}`]) gemini.webhooks.delete(id);
  });
});
