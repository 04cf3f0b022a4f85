/**
 * Reconcile's port to Gemini: what a poll answers and how it fails. The
 * adapter (gemini-poller.ts) holds the SDK, so whatever needs only the port
 * does not load it.
 */
import type { OperationKind } from '../../core/lifecycle.ts';
import type { OperationEvent } from '../../core/reducer.ts';

export type PollAnswer =
  | { kind: 'event'; event: OperationEvent }
  | { kind: 'not-found' }
  /** The provider answered a state word Ratchet has no mapping for (yet): the stored state stays, polling goes on. */
  | { kind: 'unknown-state'; raw: string }
  /**
   * Never sent, and never will be: the name is not a well-formed name of its kind (`invalid-name`), or it
   * names another Agent Platform project or location than this deployment's (`other-project`).
   */
  | { kind: 'refused'; reason: string; note: 'invalid-name' | 'other-project' };

export class PollFailedError extends Error {
  override name = 'PollFailedError';
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
  }
}

export interface GeminiPoller {
  /**
   * Throws PollFailedError for anything but an answer, a 404 or a refusal. `credential`: the label of the key the
   * job is polled with (GEMINI_API_KEYS); none, the default key.
   */
  poll(operation: { name: string; kind: OperationKind; credential?: string }): Promise<PollAnswer>;
}
