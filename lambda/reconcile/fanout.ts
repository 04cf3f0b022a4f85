/**
 * Reconcile fanned out on AWS: a dispatcher finds the due jobs and hands them
 * to a queue; poll workers, as many as the queue's event source allows, claim
 * and poll them. Both halves here, apart from their handlers, so a test runs
 * them with its own clock.
 *
 * - `dispatchDue`: every `open-by-due` partition read in parallel, page after
 *   page, the jobs due at `now` grouped by provider and key (one message holds
 *   one key's jobs, JOBS_PER_MESSAGE at most) and sent with SendMessageBatch;
 *   no more than the queue has room for (POLL_QUEUE_ROOM less what it holds),
 *   nor past the deadline. Nothing is written: a job handed out twice (still
 *   queued at the next dispatch) is claimed once.
 * - `pollMessages`: each job of each message leased with one conditional write
 *   on the due time the dispatcher saw (a duplicate's lease is refused, so no
 *   job is polled twice for one due time), the won ones polled through the same
 *   pollCandidates as every home, their polls concurrent. A worker killed after
 *   its leases leaves those jobs due again when the lease ends; a message whose
 *   jobs could not be read or leased, or whose poll threw, is reported failed.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { GetQueueAttributesCommand, SendMessageBatchCommand, type SendMessageBatchRequestEntry, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchItemFailure, SQSRecord } from 'aws-lambda';
import type { PollCandidate } from '../../app/ports.ts';
import { emptyStats, type PollDeps, pollCandidates, type ReconcileStats } from '../../app/reconcile/reconcile.ts';
import { providerOf } from '../../core/lifecycle.ts';
import { timeFromDate } from '../../core/time.ts';
import type { DueJob, DynamoDbOperationStore } from '../../engines/dynamodb/operation-store.ts';
import { POLL_BUCKETS } from '../../engines/dynamodb/tables.ts';

/** Jobs per message: one key's, polled together by one worker. */
export const JOBS_PER_MESSAGE = 50;
/** Polls in flight at once in one worker invocation (the provider's answer is most of a poll's time). */
export const POLLS_AT_ONCE = 16;
/** Messages per SendMessageBatch (SQS's limit). */
const MESSAGES_PER_BATCH = 10;
/** Bytes of one SendMessageBatch's bodies at most (SQS allows 256 KiB; names may have 512 bytes). */
const BATCH_BYTES = 200_000;
/** Index items read per Query page. */
const PAGE = 1_000;

/** What a message carries: each job and the due time it was seen at (its lease is taken only while it still is). */
export interface PollMessage {
  jobs: Array<{ name: string; due: string }>;
}

export interface DispatchDeps {
  store: Pick<DynamoDbOperationStore, 'dueJobs'>;
  sqs: SQSClient;
  queueUrl: string;
  /** Due jobs the queue may hold at most (POLL_QUEUE_ROOM). */
  room: number;
  logger: Logger;
  clock?: () => number;
}

/** Hands the jobs due at `now` to the poll queue until `deadlineMs` or the queue is full: how many were sent. */
export async function dispatchDue(deps: DispatchDeps, now: string, deadlineMs: number): Promise<number> {
  const { sqs, queueUrl, logger, clock = Date.now } = deps;
  const { Attributes = {} } = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  // Messages hold up to JOBS_PER_MESSAGE jobs: counted full, the queue is never overfilled.
  const queued =
    (Number(Attributes.ApproximateNumberOfMessages ?? 0) + Number(Attributes.ApproximateNumberOfMessagesNotVisible ?? 0)) *
    JOBS_PER_MESSAGE;
  let room = deps.room - queued;
  if (room <= 0) {
    logger.info('poll queue full: nothing dispatched this run', { queued });
    return 0;
  }
  /** Each key's jobs not yet in a message. */
  const groups = new Map<string, PollMessage['jobs']>();
  const ready: string[] = [];
  let sent = 0;
  let unsent = 0;
  const flush = async (all: boolean) => {
    while (ready.length >= MESSAGES_PER_BATCH || (all && ready.length > 0)) {
      const bodies: string[] = [];
      let bytes = 0;
      while (bodies.length < MESSAGES_PER_BATCH && ready.length > 0 && bytes + (ready[0] as string).length <= BATCH_BYTES) {
        const body = ready.shift() as string;
        bytes += body.length;
        bodies.push(body);
      }
      const entries: SendMessageBatchRequestEntry[] = bodies.map((body, i) => ({ Id: String(i), MessageBody: body }));
      const { Failed = [] } = await sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
      for (const [i, body] of bodies.entries()) {
        const jobs = (JSON.parse(body) as PollMessage).jobs.length;
        // A message not sent leaves its jobs due: the next dispatch finds them again.
        if (Failed.some((failure) => failure.Id === String(i))) unsent += jobs;
        else sent += jobs;
      }
    }
  };
  const take = (job: DueJob) => {
    const key = `${providerOf(job.kind)}#${job.credential ?? ''}`;
    const jobs = groups.get(key) ?? [];
    jobs.push({ name: job.name, due: job.due });
    groups.set(key, jobs);
    if (jobs.length === JOBS_PER_MESSAGE) {
      ready.push(JSON.stringify({ jobs } satisfies PollMessage));
      groups.delete(key);
    }
  };
  await Promise.all(
    Array.from({ length: POLL_BUCKETS }, async (_, bucket) => {
      let start: Record<string, unknown> | undefined;
      do {
        if (room <= 0 || clock() >= deadlineMs) return;
        const page = await deps.store.dueJobs(bucket, now, Math.min(PAGE, room), start);
        start = page.next;
        const jobs = page.jobs.slice(0, Math.max(0, room));
        room -= jobs.length;
        for (const job of jobs) take(job);
        await flush(false);
      } while (start);
    }),
  );
  for (const jobs of groups.values()) ready.push(JSON.stringify({ jobs } satisfies PollMessage));
  await flush(true);
  if (unsent > 0) logger.error('due jobs not sent to the poll queue: the next dispatch hands them out', { unsent });
  return sent;
}

export interface WorkerDeps extends PollDeps {
  store: PollDeps['store'] & Pick<DynamoDbOperationStore, 'lease'>;
  /** How long a job is leased for its poll: past the invocation's end, so a job is never polled twice. */
  leaseMs: number;
}

/** Polls the jobs of a batch of poll-queue messages: the run's counts and the messages to report failed. */
export async function pollMessages(
  records: Pick<SQSRecord, 'messageId' | 'body'>[],
  deps: WorkerDeps,
): Promise<{ stats: ReconcileStats; batchItemFailures: SQSBatchItemFailure[] }> {
  const { logger, clock = () => new Date() } = deps;
  const started = clock().getTime();
  const stats = emptyStats();
  const failed = new Set<string>();
  const until = timeFromDate(new Date(started + deps.leaseMs));
  const messageOf = new Map<string, string>();
  const claimed: PollCandidate[] = [];
  await Promise.all(
    records.map(async ({ messageId, body }) => {
      try {
        const { jobs } = JSON.parse(body) as PollMessage;
        if (!Array.isArray(jobs)) throw new Error('no jobs in the message');
        const leased = await Promise.all(jobs.map(({ name, due }) => deps.store.lease(name, due, until)));
        for (const candidate of leased) {
          if (!candidate) continue;
          claimed.push(candidate);
          messageOf.set(candidate.record.name, messageId);
        }
      } catch (error) {
        failed.add(messageId);
        logger.error('poll message not taken', { messageId, error });
      }
    }),
  );
  const now = started;
  const oldestMs = claimed.reduce((min, { record }) => Math.min(min, Date.parse(record.createdAt)), now);
  stats.oldestOpenAgeSeconds = Math.max(0, Math.floor((now - oldestMs) / 1000));
  await pollCandidates(
    claimed,
    { ...deps, onUnexpected: (candidate) => failed.add(messageOf.get(candidate.record.name) as string) },
    stats,
    started,
  );
  return { stats, batchItemFailures: [...failed].map((itemIdentifier) => ({ itemIdentifier })) };
}
