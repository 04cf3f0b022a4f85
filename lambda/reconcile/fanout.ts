/**
 * Reconcile fanned out on AWS: a dispatcher finds the due jobs and hands them
 * to a queue; poll workers, as many as the queue's event source allows, claim
 * and poll them. Both halves here, apart from their handlers, so a test runs
 * them with its own clock.
 *
 * - `dispatchDue`: every `open-by-due-v2` partition read in parallel, page after
 *   page, the jobs due at `now` grouped by provider and key (one message holds
 *   one key's jobs, JOBS_PER_MESSAGE at most) and sent with SendMessageBatch;
 *   no more than the queue has room for (POLL_QUEUE_ROOM less what it holds),
 *   nor past the deadline. Nothing is written: a job handed out twice (still
 *   queued at the next dispatch) is claimed once.
 * - `pollMessages`: each job leased at its turn with one conditional write on
 *   the due time the dispatcher saw (a duplicate's lease is refused, so no job
 *   is polled twice for one due time) and polled through the same
 *   pollCandidates as every home, POLLS_AT_ONCE at a time; a job of a key this
 *   worker holds back after a 429 is left due, untouched. A worker killed after
 *   its leases leaves those jobs due again when the lease ends; a message whose
 *   jobs could not be read or leased, or whose poll threw, is reported failed.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { GetQueueAttributesCommand, SendMessageBatchCommand, type SendMessageBatchRequestEntry, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchItemFailure, SQSRecord } from 'aws-lambda';
import type { PollCandidate } from '../../app/ports.ts';
import { emptyStats, type PollDeps, pollCandidates, type ReconcileStats } from '../../app/reconcile/reconcile.ts';
import { type ProviderName, providerOf } from '../../core/lifecycle.ts';
import { timeFromDate } from '../../core/time.ts';
import type { DueJob, DynamoDbOperationStore } from '../../engines/dynamodb/index.ts';
import { POLL_BUCKETS } from '../../engines/dynamodb/tables.ts';
import { JOBS_PER_MESSAGE } from './fanout-settings.ts';

/** Messages per SendMessageBatch (SQS's limit). */
const MESSAGES_PER_BATCH = 10;
/** Bytes of one SendMessageBatch's bodies at most (SQS allows 256 KiB; names may have 512 bytes). */
const BATCH_BYTES = 200_000;
/** Index items read per Query page. */
const PAGE = 1_000;

/**
 * What a message carries: one provider and key (the credential's label; none, the provider's default), and each
 * job with the due time it was seen at (its lease is taken only while it still is).
 */
export interface PollMessage {
  provider: ProviderName;
  credential?: string;
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
  const groups = new Map<string, PollMessage>();
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
    const provider = providerOf(job.kind);
    const key = `${provider}#${job.credential ?? ''}`;
    const message = groups.get(key) ?? { provider, ...(job.credential !== undefined && { credential: job.credential }), jobs: [] };
    message.jobs.push({ name: job.name, due: job.due });
    groups.set(key, message);
    if (message.jobs.length === JOBS_PER_MESSAGE) {
      ready.push(JSON.stringify(message));
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
  for (const message of groups.values()) ready.push(JSON.stringify(message));
  await flush(true);
  if (unsent > 0) logger.error('due jobs not sent to the poll queue: the next dispatch hands them out', { unsent });
  return sent;
}

export interface WorkerDeps extends Omit<PollDeps, 'onUnexpected'> {
  store: PollDeps['store'] & Pick<DynamoDbOperationStore, 'lease'>;
  /** Seconds a provider's key is held back still after a 429 (HeldKeys): its jobs are left due, unleased. */
  heldFor?: (provider: ProviderName, credential?: string) => number;
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
  const jobs: Array<{ name: string; due: string; messageId: string; provider: ProviderName; credential?: string }> = [];
  for (const { messageId, body } of records) {
    try {
      const { provider, credential, jobs: listed } = JSON.parse(body) as PollMessage;
      if (!Array.isArray(listed)) throw new Error('no jobs in the message');
      for (const { name, due } of listed) jobs.push({ name, due, messageId, provider, ...(credential !== undefined && { credential }) });
    } catch (error) {
      failed.add(messageId);
      logger.error('poll message not readable', { messageId, error });
    }
  }
  let oldestMs = started;
  // Each job leased at its turn, just before its poll: a key held back meanwhile has no more of its jobs leased.
  const lease = async ({ name, due, provider, credential }: (typeof jobs)[number]): Promise<PollCandidate | undefined> => {
    // Held back after a 429: left due, untouched (no lease, no failed poll counted); the dispatcher hands it out
    // again, and it is polled once the hold is over.
    if (deps.heldFor?.(provider, credential)) {
      stats.deferred++;
      return undefined;
    }
    const candidate = await deps.store.lease(name, due, until);
    if (candidate) oldestMs = Math.min(oldestMs, Date.parse(candidate.record.createdAt));
    return candidate;
  };
  await pollCandidates(jobs, { ...deps, onUnexpected: (job) => failed.add(job.messageId) }, stats, started, lease);
  stats.oldestOpenAgeSeconds = Math.max(0, Math.floor((started - oldestMs) / 1000));
  return { stats, batchItemFailures: [...failed].map((itemIdentifier) => ({ itemIdentifier })) };
}
