/**
 * The per-operation effects queues: one FIFO per operation, so an
 * operation's transitions go out in version order and another operation's
 * failures never hold them up; and their retry policy. In AWS an SQS FIFO
 * queue (fed by an EventBridge Pipe from the table's stream, the retry being
 * the message's visibility: lambda/effects/sqs-retry-scheduler.ts); on one machine the
 * embedded engine's table. Both hand deliver.ts the same pending effects.
 */
import type { Config } from '../config.ts';

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

/** The retry policy, as configured (EFFECTS_RETRY_*). */
export function retrySettings(
  config: Pick<Config, 'EFFECTS_RETRY_BASE_MS' | 'EFFECTS_RETRY_MAX_MS' | 'EFFECTS_RETRY_FOR_SECONDS'>,
): RetrySettings {
  return { baseMs: config.EFFECTS_RETRY_BASE_MS, maxMs: config.EFFECTS_RETRY_MAX_MS, forSeconds: config.EFFECTS_RETRY_FOR_SECONDS };
}
