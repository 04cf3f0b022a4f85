/**
 * reconcile(): one scheduled run. Finds open operations whose next poll is
 * due (the sparse index, no scan), polls each with bounded concurrency, and
 * passes what it learns to the same `ingest` as the webhook, so a stale poll
 * can never overwrite a fresher webhook. Each operation is then rescheduled:
 *
 * - something changed: poll again after the base interval;
 * - nothing new: back off, doubling up to MAX_INTERVAL (jittered ±20%);
 * - the poll failed (429, 5xx, timeout, malformed): back off the same way, the
 *   operation's other state untouched; one operation's error never stops the rest;
 * - 404 three times in a row: stop polling it (`pollNote: not-found`); a
 *   webhook can still finish it. An interaction's 404 within its first 10
 *   minutes is not counted: right after creation it can be transient;
 * - a state Gemini answers that Ratchet has no mapping for (a status newer
 *   than this Ratchet): counted (`unknownStates`), kept raw in `pollNote`
 *   (`unknown-state:<value>`), never guessed and never a failed poll: the
 *   stored state stays and polling goes on at the pace of an unchanged poll;
 * - a name that is not a well-formed name of its kind is never sent (the
 *   poller refuses it): polling stops at once (`pollNote: invalid-name`), and
 *   so does an Agent Platform name of another project or location than this
 *   deployment's (`pollNote: other-project`);
 * - tracked but never observed (no state yet) for longer than
 *   `unseenExpiryMs` (TRACKED_EXPIRY_DAYS): polling stops, unpolled
 *   (`pollNote: expired-unseen`), so names nobody created cost no polls forever;
 * - open past its kind's limit (OVERDUE_AFTER, core/overdue.ts): marked
 *   overdue once, at the start of the first run after its limit, whatever its
 *   poll schedule (its next poll half an hour away, or polling stopped): the
 *   store finds those jobs by age from an index (`findOverdue`, by its own
 *   clock), and each mark is a version of its own whose effect is
 *   `operation.overdue`, in order with the job's state changes (`overdue`).
 *
 * Each run also reports how many Gemini webhooks pointing here Gemini has
 * disabled (checked at most hourly, see webhook-health.ts), and at most
 * hourly adopts batches nobody tracked (discovery.ts).
 *
 * The run stops taking new work at its deadline; what is left is still due
 * and is picked up by the next run.
 *
 * Where many workers poll (AWS), a run hands the due jobs off instead
 * (`handOff`), and each worker polls the ones it claims through the same
 * pollCandidates, which every home's run uses too.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { type OverdueLimits, overdueMark } from '../../core/overdue.ts';
import { isPolled, type OperationRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import { ingest, NotRecordedError } from '../ingest.ts';
import {
  type OperationStore,
  type OverdueWatch,
  type PollCandidate,
  type PollNext,
  type PollSchedule,
  StoreRejectedError,
} from '../ports.ts';
import type { PollOutcome, Telemetry } from '../telemetry.ts';
import type { Discovery } from './discovery.ts';
import { NotPolledHereError, type Poller, PollFailedError } from './poller.ts';
import type { WebhookHealth } from './webhook-health.ts';

export interface ReconcileDeps {
  store: OperationStore & PollSchedule & OverdueWatch;
  poller: Poller;
  logger: Logger;
  clock?: () => Date;
  random?: () => number;
  /** Base poll interval: also the local schedule period. */
  intervalSeconds: number;
  /** Stop taking new work after this long. */
  budgetMs: number;
  concurrency?: number;
  /** Due operations claimed per run (earliest due first; the rest wait for the next run). */
  pageSize?: number;
  /** The hourly check of the Gemini webhooks pointing here (its count is reported every run). */
  health?: WebhookHealth;
  /** The hourly sweep for batches nobody tracked. */
  discovery?: Discovery;
  /** An operation tracked this long ago and never observed is polled no more (TRACKED_EXPIRY_DAYS; default never). */
  unseenExpiryMs?: number;
  /** How long each kind may stay open before it is marked overdue (OVERDUE_AFTER); default: never marked. */
  overdueAfter?: OverdueLimits;
  /** Counts each poll by kind and outcome (`ratchet_reconcile_polls_total`). */
  telemetry?: Telemetry;
  /**
   * Where the due jobs go instead of being claimed and polled here: to the workers that poll them (AWS's
   * dispatcher), by `deadlineMs` (clock milliseconds). Answers how many were handed out; the workers count the polls.
   */
  handOff?: (now: string, deadlineMs: number) => Promise<number>;
}

/** What polling claimed jobs needs of a run's settings (pollCandidates). */
export type PollDeps<Job = PollCandidate> = Pick<
  ReconcileDeps,
  'store' | 'poller' | 'logger' | 'clock' | 'random' | 'intervalSeconds' | 'budgetMs' | 'concurrency' | 'unseenExpiryMs' | 'telemetry'
> & {
  /** Told of each job whose claim or poll threw past its handling (the AWS worker reports its message failed). */
  onUnexpected?: (job: Job, error: unknown) => void;
};

export interface ReconcileStats {
  polled: number;
  applied: number;
  unchanged: number;
  failed: number;
  notFound: number;
  /** Operations whose polling stopped this run because Gemini answered 404 NOT_FOUND_LIMIT times in a row. */
  notFoundStopped: number;
  /** Polls that reported a different terminal state than the stored one (a provider anomaly, never applied). */
  conflicts: number;
  /** Due, but left for the next run (deadline reached). */
  deferred: number;
  /** Names the poller refused to send (not a well-formed name of their kind); polling them stopped. */
  refused: number;
  /** Tracked, never observed, past the expiry: polling them stopped without a poll. */
  expired: number;
  /** Answers with a state Ratchet has no mapping for (the stored state kept; not a failure). */
  unknownStates: number;
  /** Jobs found open past their kind's limit this run, each marked overdue (its `operation.overdue` effect sent once). */
  overdue: number;
  /** Age of the oldest open operation due this run, in seconds (0 when none): stuck jobs show here. */
  oldestOpenAgeSeconds: number;
  /** Gemini webhooks pointing here that Gemini disabled after failed deliveries (absent until a health check succeeded). */
  webhooksDisabled?: number;
  /** Batches found by the discovery sweep that Ratchet did not know (only on runs that swept). */
  adopted?: number;
  /** Due jobs handed to the poll workers (only where a run hands them off: AWS's dispatcher). */
  dispatched?: number;
}

export const MAX_INTERVAL_SECONDS = 30 * 60;
/** A claim outlives the run's budget by this much: the polls in flight at the deadline finish under it. */
const CLAIM_MARGIN_MS = 15_000;
export const NOT_FOUND_LIMIT = 3;
/** An interaction's 404 this soon after it was first recorded is not counted toward NOT_FOUND_LIMIT. */
export const INTERACTION_NOT_FOUND_GRACE_MS = 10 * 60_000;

/** A run's counts, all zero. */
export function emptyStats(): ReconcileStats {
  return {
    polled: 0,
    applied: 0,
    unchanged: 0,
    failed: 0,
    notFound: 0,
    notFoundStopped: 0,
    conflicts: 0,
    deferred: 0,
    refused: 0,
    expired: 0,
    unknownStates: 0,
    overdue: 0,
    oldestOpenAgeSeconds: 0,
  };
}

export async function reconcile(deps: ReconcileDeps): Promise<ReconcileStats> {
  const { store, logger, clock = () => new Date(), pageSize = 800 } = deps;
  const started = clock().getTime();
  const stats = emptyStats();
  const disabled = await deps.health?.disabledWebhooks();
  if (disabled !== undefined) stats.webhooksDisabled = disabled;
  const now = timeFromDate(clock());
  // Before the polls: a job past its limit is marked whether or not it is due for one.
  if (deps.overdueAfter) await markOverdue(deps, deps.overdueAfter, now, stats, started);
  let due = 0;
  if (deps.handOff) {
    // The due jobs go to the workers that poll them (AWS: lambda/reconcile/fanout.ts), each claimed there.
    stats.dispatched = await deps.handOff(now, started + deps.budgetMs);
    due = stats.dispatched;
  } else {
    // Claimed for the run's budget: another instance polling the same store is handed none of them meanwhile.
    const claimed = await store.claimDue(now, pageSize, deps.budgetMs + CLAIM_MARGIN_MS);
    const oldestMs = claimed.reduce((min, { record }) => Math.min(min, Date.parse(record.createdAt)), Date.parse(now));
    stats.oldestOpenAgeSeconds = Math.max(0, Math.floor((Date.parse(now) - oldestMs) / 1000));
    await pollCandidates(claimed, deps, stats, started);
    due = claimed.length;
  }
  // After the due polls (someone may be waiting on those), and only with time left: the hourly discovery sweep.
  if (deps.discovery && clock().getTime() - started < deps.budgetMs) {
    const swept = await deps.discovery.sweepIfDue();
    if (swept) stats.adopted = swept.adopted;
  }
  // An idle run (nothing due) every period is noise: at debug level only.
  logger[due === 0 ? 'debug' : 'info']('reconcile run', { ...stats, due, durationMs: clock().getTime() - started });
  return stats;
}

/**
 * Polls jobs claimed for this run, `concurrency` at once, each through the
 * same ingest as a webhook and rescheduled (pollOne), until the budget from
 * `started` is spent: those left are counted `deferred` and are due again
 * when their claim ends. Jobs not claimed yet are claimed one by one as their
 * turn comes (`claim`; undefined: another has it), so a claim is never taken
 * long before its poll. What every home's run and the AWS poll worker share.
 */
export async function pollCandidates<Job = PollCandidate>(
  jobs: Job[],
  deps: PollDeps<Job>,
  stats: ReconcileStats,
  started: number,
  claim: (job: Job) => Promise<PollCandidate | undefined> = async (job) => job as PollCandidate,
): Promise<void> {
  const { logger, clock = () => new Date(), concurrency = 8 } = deps;
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < jobs.length) {
        if (clock().getTime() - started > deps.budgetMs) {
          stats.deferred += jobs.length - next;
          next = jobs.length;
          return;
        }
        const job = jobs[next++] as Job;
        let candidate: PollCandidate | undefined;
        try {
          candidate = await claim(job);
          if (candidate) await pollOne(candidate, deps, stats);
        } catch (error) {
          stats.failed++;
          deps.onUnexpected?.(job, error);
          logger.error(candidate ? 'poll failed unexpectedly' : 'poll claim failed', { operation: candidate?.record.name, error });
        }
      }
    }),
  );
}

async function pollOne(candidate: PollCandidate, deps: PollDeps<never>, stats: ReconcileStats): Promise<void> {
  const { store, poller, logger, clock = () => new Date() } = deps;
  const { poll, record } = candidate;
  if (
    record.state === null &&
    deps.unseenExpiryMs !== undefined &&
    clock().getTime() - Date.parse(record.createdAt) > deps.unseenExpiryMs
  ) {
    stats.expired++;
    logger.warn('tracked but never observed since it was tracked: polling stopped', {
      operation: record.name,
      trackedAt: record.createdAt,
    });
    await store.schedulePoll(record.name, record.version, { ...poll, nextPollAt: null, note: 'expired-unseen' });
    return;
  }
  stats.polled++;
  const polled = (outcome: PollOutcome) => deps.telemetry?.poll(record.kind, outcome);
  const reschedule = (
    fields: { unchangedPolls: number; failedPolls: number; notFoundPolls: number; note?: string },
    version = record.version,
  ) =>
    store.schedulePoll(record.name, version, {
      ...fields,
      nextPollAt: nextPoll(deps, clock(), Math.max(fields.unchangedPolls, fields.failedPolls)),
    });
  let answer: Awaited<ReturnType<Poller['poll']>>;
  try {
    answer = await poller.poll(record);
  } catch (error) {
    if (error instanceof NotPolledHereError) {
      // No request was made: not a failure (no alarm for a provider nobody set up here); asked again later, backing off.
      stats.polled--;
      await reschedule({ ...poll, unchangedPolls: poll.unchangedPolls + 1, note: error.message });
      return;
    }
    if (!(error instanceof PollFailedError)) throw error;
    stats.failed++;
    polled('failed');
    logger.warn('poll failed; backing off', { operation: record.name, status: error.status, detail: error.message });
    await reschedule({ ...poll, failedPolls: poll.failedPolls + 1, note: error.message });
    return;
  }
  if (answer.kind === 'unknown-state') {
    stats.unknownStates++;
    polled('unknown-state');
    logger.warn('poll answered a state this Ratchet does not know; the stored state kept, polling goes on', {
      operation: record.name,
      providerState: answer.raw.slice(0, 100),
    });
    await reschedule({
      unchangedPolls: poll.unchangedPolls + 1,
      failedPolls: 0,
      notFoundPolls: 0,
      note: `unknown-state:${answer.raw.slice(0, 100)}`,
    });
    return;
  }
  if (answer.kind === 'refused') {
    stats.refused++;
    polled('refused');
    logger.error('poll refused: polling stopped', { operation: record.name, kind: record.kind, reason: answer.reason });
    await store.schedulePoll(record.name, record.version, { ...poll, nextPollAt: null, note: answer.note });
    return;
  }
  if (answer.kind === 'not-found') {
    stats.notFound++;
    polled('not-found');
    const young =
      (record.kind === 'interaction' || record.kind === 'platform-interaction') &&
      clock().getTime() - Date.parse(record.createdAt) < INTERACTION_NOT_FOUND_GRACE_MS;
    const notFoundPolls = poll.notFoundPolls + (young ? 0 : 1);
    if (notFoundPolls >= NOT_FOUND_LIMIT) {
      stats.notFoundStopped++;
      // Never a terminal state invented from a 404: a webhook may still finish it, and waitFor is told at once.
      logger.warn('operation not found at Gemini; polling stopped, its state left as it was', {
        operation: record.name,
        state: record.state,
        polls: notFoundPolls,
      });
      await store.schedulePoll(record.name, record.version, { ...poll, notFoundPolls, nextPollAt: null, note: 'not-found' });
    } else {
      await reschedule({ ...poll, notFoundPolls, note: 'not-found' });
    }
    return;
  }
  // The next poll after an answer that was recorded: sooner after a change, later after each poll that changed nothing.
  const pollNext: PollNext = ({ stateChanged }) => {
    const unchangedPolls = stateChanged ? 0 : poll.unchangedPolls + 1;
    return { unchangedPolls, failedPolls: 0, notFoundPolls: 0, nextPollAt: nextPoll(deps, clock(), unchangedPolls) };
  };
  let result: Awaited<ReturnType<typeof ingest>>;
  try {
    // The record at hand picks the write's variant: a poll costs one write, no read.
    // Its next poll goes with it where the store can write both at once (PostgreSQL: one statement).
    result = await ingest({ ...answer.event, eventId: `poll:${timeFromDate(clock())}` }, { store, clock, current: record, pollNext });
  } catch (error) {
    polled('failed');
    if (error instanceof StoreRejectedError) {
      stats.failed++;
      logger.error('poll result refused by the store; backing off', { operation: record.name, detail: error.message });
      await reschedule({ ...poll, failedPolls: poll.failedPolls + 1, note: 'unstorable' });
      return;
    }
    if (!(error instanceof NotRecordedError)) throw error;
    stats.failed++; // still due: the next run polls it again
    logger.error('poll result not recorded', { operation: record.name, reason: error.reason });
    return;
  }
  const changed = result.outcome === 'applied' && result.stateChanged;
  if (result.outcome === 'applied') stats.applied++;
  else stats.unchanged++;
  polled(result.outcome === 'applied' ? 'applied' : 'unchanged');
  if (result.outcome === 'discarded' && result.reason === 'terminal-conflict') {
    stats.conflicts++;
    logger.warn('poll reported a different terminal state; the first stays', {
      operation: record.name,
      storedState: result.record.state,
      polledState: answer.event.state,
    });
  }
  // A job waiting for its outcome, whose poll answers another end: the first end stays, and no poll will ever give it.
  if (result.outcome === 'discarded' && result.reason === 'terminal-conflict' && result.record.resultPending) {
    await store.schedulePoll(record.name, result.record.version, {
      ...pollNext({ stateChanged: false }),
      nextPollAt: null,
      note: 'terminal-conflict',
    });
    return;
  }
  // The write that ended it took it out of the index (unless it waits for its outcome: polled on until it comes).
  if (!isPolled(result.record) || result.scheduled) return;
  await store.schedulePoll(record.name, result.record.version, pollNext({ stateChanged: changed }));
}

/** Jobs found overdue and marked per run at most; the rest are found by the next run. */
const OVERDUE_PAGE = 500;

/**
 * Marks each job the store finds open past its kind's limit and not yet marked: one conditional write on its version
 * (a lost race leaves it to the next run), at the time the store judged it by. Its effect goes out through every
 * sink. A store that cannot answer now costs this run its marks, never its polls.
 */
async function markOverdue(deps: ReconcileDeps, limits: OverdueLimits, now: string, stats: ReconcileStats, started: number): Promise<void> {
  const { store, logger, clock = () => new Date(), concurrency = 8 } = deps;
  let found: Awaited<ReturnType<OverdueWatch['findOverdue']>>;
  try {
    found = await store.findOverdue(limits, now, OVERDUE_PAGE);
  } catch (error) {
    logger.error('overdue jobs not looked for this run', { error });
    return;
  }
  const { at, records } = found;
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < records.length && clock().getTime() - started <= deps.budgetMs) {
        const record = records[next++] as OperationRecord;
        const mark = overdueMark(record, limits, at);
        if (!mark) continue;
        const written = await store.write(mark, record.version).catch((error) => {
          logger.error('overdue mark not written', { operation: record.name, error });
          return { ok: false };
        });
        if (!written.ok) continue;
        stats.overdue++;
        logger.warn('operation overdue: open past its kind’s limit (OVERDUE_AFTER)', {
          operation: record.name,
          kind: record.kind,
          state: record.state,
          openSince: record.createdAt,
          afterSeconds: mark.overdue?.afterSeconds,
        });
      }
    }),
  );
}

/** Base interval doubled per step, capped, jittered ±20% so polls spread out. */
export function nextPoll(deps: Pick<PollDeps, 'intervalSeconds' | 'random'>, now: Date, steps: number): string {
  const random = deps.random ?? Math.random;
  const seconds = Math.min(MAX_INTERVAL_SECONDS, deps.intervalSeconds * 2 ** Math.min(steps, 16));
  const jittered = seconds * (0.8 + 0.4 * random());
  return timeFromDate(new Date(now.getTime() + jittered * 1000));
}
