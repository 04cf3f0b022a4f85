/** What waitFor decides without the network: its options checked, a state reached, polling stopped for good. */
import { isTerminal, OPERATION_STATES, type OperationState, rankOf } from '../../core/lifecycle.ts';
import type { OperationView } from '../../core/views.ts';
import { RatchetError } from './errors.ts';

/**
 * Reconcile stopped polling an open operation for good: Gemini no longer knows
 * it (`not-found`: a 404 never becomes a terminal state), or the name can never
 * be polled here (`polling-stopped`). Only a webhook could still move it, so a
 * wait for it ends at once.
 */
export function pollingStopped(operation: OperationView): RatchetError | undefined {
  const polling = operation.polling;
  if (!polling || polling.nextPollAt !== null || !polling.note || isTerminal(operation.state)) return undefined;
  const state = operation.state ?? 'unobserved';
  if (polling.note === 'not-found') {
    return new RatchetError(
      'not-found',
      `${operation.name}: Gemini no longer knows it (404 ${polling.notFoundPolls} times in a row); polling stopped with it ${state}`,
      404,
      operation,
    );
  }
  if (!STOPPED_NOTES.has(polling.note)) return undefined;
  return new RatchetError('polling-stopped', `${operation.name}: polling stopped (${polling.note}) with it ${state}`, undefined, operation);
}

/** Why reconcile stops polling an open operation for good (besides not-found). */
const STOPPED_NOTES = new Set(['invalid-name', 'other-project', 'expired-unseen']);

/** `until` and `timeoutMs` as waitFor takes them, or a RatchetError at once: a wait for a state that cannot come never ends. */
export function checkWaitOptions(until: unknown, timeoutMs: unknown): void {
  if (until !== 'terminal' && !(OPERATION_STATES as readonly unknown[]).includes(until)) {
    const upper = typeof until === 'string' ? until.toUpperCase() : '';
    const hint =
      (OPERATION_STATES as readonly string[]).includes(upper) || upper === 'TERMINAL'
        ? ` (did you mean '${upper === 'TERMINAL' ? 'terminal' : upper}'?)`
        : '';
    throw new RatchetError(
      'invalid-argument',
      `waitFor: until must be 'terminal' or one of ${OPERATION_STATES.join(', ')}, not ${JSON.stringify(until)}${hint}`,
    );
  }
  if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0))
    throw new RatchetError(
      'invalid-argument',
      `waitFor: timeoutMs must be a number of milliseconds, 0 or more, not ${JSON.stringify(timeoutMs)}`,
    );
}

export function reached(state: OperationState | null, until: 'terminal' | OperationState): boolean {
  if (until === 'terminal') return isTerminal(state);
  if (state === until) return true;
  return !isTerminal(until) && rankOf(state) > rankOf(until);
}
