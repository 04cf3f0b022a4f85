/**
 * One effect's delivery, in the domain's words, whatever queue holds it: an
 * applied state change (a Transition) with where its attempts stand, handed
 * to every sink once (the ledger skips what a sink already took), and what
 * the queue must do next: forget it (done: delivered, parked behind a dead
 * letter, or dead-lettered), or offer it again after a backoff.
 *
 * The queues adapt their transport to this: SQS FIFO's messages in AWS
 * (lambda/effects/process.ts), the embedded engine's table on one machine.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { type StepSpan, secondsSince, type Telemetry } from '../telemetry.ts';
import type { DeadLetterReason, DeadLetters } from './dead-letters.ts';
import type { EffectLedger } from './ledger.ts';
import { nextAttempt, type RetrySettings } from './queue.ts';
import { type EffectSink, SinkError } from './sinks.ts';
import { effectEvent, idempotencyKey, type Transition } from './transition.ts';

/** An applied state change waiting for its effects, as a queue offers it. */
export interface PendingEffect {
  transition: Transition;
  /** This attempt's number: 1 for the first. */
  attempt: number;
  /** When it was first attempted (epoch ms). */
  firstAttemptAtMs: number;
  /** What the attempt before this one came to, in words, where the queue keeps it. */
  earlierFailure?: string;
  /** Put back by redrive: delivered, it clears its dead letter. */
  redriven: boolean;
  /**
   * The queue knows from the change itself that no effect of its operation came before it (AWS: the stream
   * record's previousState and overdue mark): no dead letter can hold it back, so none is looked for.
   */
  noEarlierEffect?: boolean;
  /** Aborted when the queue can no longer keep this delivery's claim: each sink is told to stop. */
  signal?: AbortSignal;
  /** The `traceparent` of the write that made it, where the engine kept one (OpenTelemetry on): each sink's span links to it. */
  traceparent?: string;
}

export type EffectOutcome = { kind: 'done' } | { kind: 'retry'; inMs: number; lastError: string };

export interface DeliveryDeps {
  sinks: EffectSink[];
  ledger: EffectLedger;
  deadLetters: Pick<DeadLetters, 'holdsBack' | 'put' | 'remove'>;
  retry: RetrySettings;
  logger: Logger;
  /**
   * Counts each effect's fate (`EffectDelivered`, `EffectDeadLettered`, …): on AWS Powertools' EMF metrics
   * (lambda/telemetry.ts), described here by the one call made of it so app/ imports no metrics backend; the
   * queue's edge publishes them once per batch.
   */
  metrics?: { addMetric(name: string, unit: 'Count', value: number): void };
  /** Each sink's outcome and lag (`ratchet_effect_lag_seconds`), and a span per sink's delivery where OpenTelemetry is on. */
  telemetry?: Telemetry;
  clock?: () => Date;
}

export async function deliverEffect(effect: PendingEffect, deps: DeliveryDeps): Promise<EffectOutcome> {
  const { sinks, ledger, deadLetters, logger, clock = () => new Date() } = deps;
  const { transition, attempt, firstAttemptAtMs } = effect;
  const count = (metric: string) => deps.metrics?.addMetric(metric, 'Count', 1);
  const key = idempotencyKey(transition);
  const deadLetter = (reason: DeadLetterReason, lastError: string) =>
    deadLetters.put({
      name: transition.name,
      version: transition.version,
      idempotencyKey: key,
      reason,
      transition,
      body: JSON.stringify(effectEvent(transition)),
      lastError,
      attempts: attempt,
      firstAttemptAt: new Date(firstAttemptAtMs).toISOString(),
      deadLetteredAt: clock().toISOString(),
      status: 'dead',
    });

  // Ordering is never silently broken: behind a dead letter of this operation, wait (parked) until it is re-driven.
  if (!effect.noEarlierEffect && (await deadLetters.holdsBack(transition.name, transition.version))) {
    await deadLetter('waiting-behind', 'an earlier version of this operation is dead-lettered');
    logger.warn('effect parked behind a dead letter of its operation', { key });
    count('EffectParked');
    return { kind: 'done' };
  }
  const { telemetry } = deps;
  let span: StepSpan | undefined;
  try {
    for (const sink of sinks) {
      if (await ledger.isDelivered(sink.name, key)) continue;
      span = telemetry?.span?.(
        'ratchet.effect',
        {
          'ratchet.sink': sink.name,
          'ratchet.operation.name': transition.name,
          'ratchet.operation.kind': transition.kind,
          'ratchet.operation.version': transition.version,
          'ratchet.operation.state': transition.state ?? '',
          'ratchet.effect.attempt': attempt,
        },
        effect.traceparent,
      );
      await sink.deliver(transition, effect.signal);
      await ledger.markDelivered(sink.name, key, {
        attempts: attempt,
        ...(effect.earlierFailure && { earlierFailure: effect.earlierFailure }),
      });
      span?.end();
      telemetry?.effect(sink.name, secondsSince(transition.recordedAt, clock().getTime()));
      logger.info('effect delivered', { sink: sink.name, key, attempt, state: transition.state, previousState: transition.previousState });
      count('EffectDelivered');
    }
    if (effect.redriven) await deadLetters.remove(transition.name, transition.version);
    return { kind: 'done' };
  } catch (error) {
    span?.end(error);
    const detail = error instanceof SinkError ? error.outcome : (error as Error).message;
    const decision = nextAttempt(
      { number: attempt, firstAttemptAtMs, nowMs: clock().getTime(), permanent: error instanceof SinkError && error.permanent },
      deps.retry,
    );
    if ('deadLetter' in decision) {
      await deadLetter(decision.deadLetter, detail);
      logger.error('effect dead-lettered', { key, attempt, reason: decision.deadLetter, detail });
      count('EffectDeadLettered');
      return { kind: 'done' };
    }
    logger.warn('effect attempt failed; retrying', { key, attempt, retryInMs: decision.retryInMs, detail });
    count('EffectRetried');
    return { kind: 'retry', inMs: decision.retryInMs, lastError: detail };
  }
}
