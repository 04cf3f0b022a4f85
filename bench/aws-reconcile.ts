/**
 * Reconcile's fan-out on AWS, in `npm run bench`'s AWS section: the poll
 * worker's code (lambda/reconcile/fanout.ts `pollMessages`, POLLS_AT_ONCE
 * polls at a time) given the batches the event source hands it (10 messages
 * of JOBS_PER_MESSAGE jobs), against a fake Gemini on 127.0.0.1 answering in
 * 100 ms through the real @google/genai SDK. Its store holds the jobs in
 * memory and answers each request after DynamoDB's latency
 * (BENCH_DYNAMODB_LATENCY_MS, default 5): moto serves one request at a time,
 * which DynamoDB does not, so on moto the figure would be moto's. Reported:
 * polls a second per worker invocation, and the minutes one sweep of a
 * million open jobs takes at the stack's default concurrency (10 workers).
 *
 * BENCH_FANOUT_BATCHES (worker invocations measured, default 6).
 */

import type { ApplyOutcome, PollCandidate, PollState } from '../app/ports.ts';
import { CredentialHealth } from '../app/reconcile/credentials.ts';
import { openPollers } from '../app/reconcile/open.ts';
import type { ReconcileStats } from '../app/reconcile/reconcile.ts';
import { applyEvent, type OperationEvent, type OperationRecord, trackedRecord } from '../core/reducer.ts';
import { timeFromDate } from '../core/time.ts';
import { pollMessages } from '../lambda/reconcile/fanout.ts';
import { JOBS_PER_MESSAGE, POLLS_AT_ONCE } from '../lambda/reconcile/fanout-settings.ts';
import { FakeGemini } from '../test/support/fake-gemini.ts';
import { silentLogger } from '../test/support/silent-logger.ts';

const LATENCY_MS = Number(process.env.BENCH_DYNAMODB_LATENCY_MS ?? 5);
const BATCHES = Number(process.env.BENCH_FANOUT_BATCHES ?? 6);
/** The construct's defaults (lib/ratchet.ts): messages per invocation, workers at once. */
const BATCH_SIZE = 10;
const MAX_CONCURRENCY = 10;
const PROVIDER_MS = 100;

const later = () => new Promise((resolve) => setTimeout(resolve, LATENCY_MS));

/** The worker's store as DynamoDB answers it: the lease, the poll's conditional write, the next poll; each after the latency. */
class LatentStore {
  readonly items = new Map<string, { record: OperationRecord; due: string; poll: Omit<PollState, 'nextPollAt'> }>();
  requests = 0;

  async lease(name: string, due: string, until: string): Promise<PollCandidate | undefined> {
    await later();
    this.requests++;
    const item = this.items.get(name);
    if (!item || item.due !== due) return undefined;
    item.due = until;
    return { record: structuredClone(item.record), poll: { nextPollAt: due, ...item.poll } };
  }

  async apply(event: OperationEvent, now: string): Promise<ApplyOutcome> {
    await later();
    this.requests++;
    const item = this.items.get(event.name) as NonNullable<ReturnType<typeof this.items.get>>;
    const decision = applyEvent(item.record, event, now);
    if (!decision.applied) return { ok: false, current: structuredClone(item.record) };
    item.record = decision.next;
    return { ok: true, record: structuredClone(decision.next) };
  }

  async schedulePoll(name: string, version: number, poll: Omit<PollState, 'nextPollAt'> & { nextPollAt: string | null }) {
    await later();
    this.requests++;
    const item = this.items.get(name);
    if (!item || item.record.version !== version) return false;
    item.due = poll.nextPollAt ?? '';
    item.poll = { unchangedPolls: poll.unchangedPolls, failedPolls: poll.failedPolls, notFoundPolls: poll.notFoundPolls };
    return true;
  }

  async get(name: string) {
    return this.items.get(name)?.record;
  }

  async write(): Promise<never> {
    throw new Error('not written by a poll');
  }
}

const gemini = await new FakeGemini('bench-key').start();
gemini.answerDelayMs = PROVIDER_MS;
const store = new LatentStore();
const due = timeFromDate(new Date(Date.now() - 60_000));
const opened = await openPollers(
  {
    intervalSeconds: 60,
    unseenExpiryMs: 30 * 86_400_000,
    overdueAfter: {} as never,
    webhookUrl: undefined,
    poller: async () => ({ gemini: { apiKey: 'bench-key', baseUrl: gemini.baseUrl }, timeoutMs: 5_000 }),
  },
  { logger: silentLogger, credentials: new CredentialHealth([]) },
);
const poller = opened?.poller as NonNullable<typeof opened>['poller'];

let polled = 0;
let seconds = 0;
for (let batch = 0; batch < BATCHES; batch++) {
  const records = Array.from({ length: BATCH_SIZE }, (_, m) => {
    const jobs = Array.from({ length: JOBS_PER_MESSAGE }, (_, j) => {
      const name = `batches/fanout-${batch}-${m}-${j}`;
      store.items.set(name, {
        record: trackedRecord(name, 'batch', due),
        due,
        poll: { unchangedPolls: 0, failedPolls: 0, notFoundPolls: 0 },
      });
      gemini.batches.set(name, { state: 'BATCH_STATE_RUNNING', updateTime: new Date().toISOString() });
      return { name, due };
    });
    return { messageId: `m${batch}-${m}`, body: JSON.stringify({ provider: 'gemini', jobs }) };
  });
  const started = performance.now();
  const { stats }: { stats: ReconcileStats } = await pollMessages(records, {
    store: store as never,
    poller,
    logger: silentLogger,
    intervalSeconds: 60,
    budgetMs: 100_000,
    leaseMs: 135_000,
    concurrency: POLLS_AT_ONCE,
  });
  // The first invocation loads the SDK (a cold start's): measured from the second on.
  if (batch === 0) continue;
  seconds += (performance.now() - started) / 1000;
  polled += stats.polled;
}
await gemini.stop();

const perWorker = polled / seconds;
const sweepMinutes = 1_000_000 / (perWorker * MAX_CONCURRENCY) / 60;
console.log(
  `\nReconcile fan-out (one worker invocation: ${BATCH_SIZE} messages of ${JOBS_PER_MESSAGE} jobs, ${POLLS_AT_ONCE} polls at once; the provider answering in ${PROVIDER_MS} ms, DynamoDB modelled at ${LATENCY_MS} ms a request, ${(store.requests / (polled + BATCH_SIZE * JOBS_PER_MESSAGE)).toFixed(1)} requests a poll):`,
);
console.log(`  polls a second per worker invocation: ${perWorker.toFixed(0)} (${polled} polls in ${seconds.toFixed(1)} s)`);
console.log(
  `  one sweep of 1,000,000 open jobs at the default MaximumConcurrency (${MAX_CONCURRENCY}): ${sweepMinutes.toFixed(1)} minutes (at most 30 asked)`,
);
