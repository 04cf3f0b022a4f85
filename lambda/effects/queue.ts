/**
 * The per-operation effects queues: one FIFO message group per operation, so
 * an operation's transitions go out in version order and another operation's
 * failures never hold them up. In AWS an SQS FIFO queue (fed by an EventBridge
 * Pipe from the table's stream); on one machine `local/engine/effects-queue.ts`, with the
 * same message shape and semantics (in AWS the retry is sqs-retry-scheduler.ts).
 */
import type { SQSRecord } from 'aws-lambda';

/** The message attribute that marks a re-driven transition. */
export const REDRIVEN_ATTRIBUTE = 'redriven';
/** Where the embedded engine's queue hands a message's last failed attempt back (SQS keeps none). */
export const LAST_ERROR_ATTRIBUTE = 'lastError';

export interface RetrySettings {
  /** First retry delay, doubled per attempt. */
  baseMs: number;
  /** The longest delay between attempts. */
  maxMs: number;
  /** How long after the first attempt a transition is retried before it is dead-lettered. */
  forSeconds: number;
}

export type RetryDecision = { retryInMs: number } | { deadLetter: 'retries-exhausted' | 'gone' };

/**
 * After a failed attempt: retry after base·2^(attempt−1), capped at maxMs and at
 * the end of the window, or dead-letter (window over, or the receiver said 410).
 */
export function nextAttempt(
  attempt: { number: number; firstAttemptAtMs: number; nowMs: number; permanent: boolean },
  settings: RetrySettings,
): RetryDecision {
  if (attempt.permanent) return { deadLetter: 'gone' };
  const left = attempt.firstAttemptAtMs + settings.forSeconds * 1000 - attempt.nowMs;
  if (left <= 0) return { deadLetter: 'retries-exhausted' };
  const backoff = settings.baseMs * 2 ** Math.min(Math.max(attempt.number - 1, 0), 40);
  return { retryInMs: Math.max(1, Math.min(settings.maxMs, backoff, left)) };
}

/** Makes a received message visible again only after a delay: the queue's backoff. */
export interface RetryScheduler {
  /** `lastError`: what the failed attempt came to, in words, where the queue keeps it (the embedded engine's does). */
  retryAfter(message: SQSRecord, delayMs: number, lastError?: string): Promise<void>;
}
