/**
 * A storm of batch events, as the engine tests send it to a store: each
 * operation PENDING → RUNNING → SUCCEEDED at increasing times, every event
 * twice, shuffled (or in order, once).
 */
import type { OperationEvent } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { shuffle } from './shuffle.ts';

export function batchStorm(names: string[], seed: number, shuffled = true): OperationEvent[] {
  const states = [
    ['PENDING', 'BATCH_STATE_PENDING'],
    ['RUNNING', 'BATCH_STATE_RUNNING'],
    ['SUCCEEDED', 'BATCH_STATE_SUCCEEDED'],
  ] as const;
  const events = names.flatMap((name) =>
    states.map(([state, providerState], i) => ({
      name,
      kind: 'batch' as const,
      state,
      providerState,
      source: 'webhook' as const,
      eventId: `${name}-${i}`,
      updateTime: normalizeTime(`2026-12-06T00:00:0${i}Z`),
    })),
  );
  return shuffled ? shuffle([...events, ...events], seed) : events;
}
