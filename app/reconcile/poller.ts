/**
 * Reconcile's port to the providers: what a poll answers and how it fails
 * (providers/port.ts). The adapters hold the SDKs, so whatever needs only the
 * port does not load one.
 */
import type { PollAnswer, PollTarget } from '../../providers/port.ts';

import { PollFailedError } from '../../providers/port.ts';

export { type PollAnswer, PollFailedError } from '../../providers/port.ts';

/** A job whose provider has no credential here: not a failed poll (no request was made); asked again later. */
export class NotPolledHereError extends PollFailedError {
  override name = 'NotPolledHereError';
}

/** What reconcile polls with: every provider's jobs, each by its kind's poller (providers.ts). */
export interface Poller {
  /**
   * Throws PollFailedError for anything but an answer, a 404 or a refusal. `credential`: the label of the key the
   * job is polled with; none, the provider's default key.
   */
  poll(operation: PollTarget): Promise<PollAnswer>;
}

/** Gemini's poller (gemini-poller.ts) is one. */
export type GeminiPoller = Poller;
