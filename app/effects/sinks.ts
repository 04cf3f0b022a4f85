/** Where effects go (eventbridge-sink.ts, webhook-sink.ts). Each sink throws when a delivery did not succeed. */
import type { Transition } from './transition.ts';

/** The outbound signed webhook's name in the ledger (webhook-sink.ts). */
export const WEBHOOK_SINK = 'webhook';

export interface EffectSink {
  /** Names the sink in the ledger: changing it re-delivers everything. */
  readonly name: string;
  /** `signal` aborts a delivery whose claim could not be kept (the PostgreSQL queue's lease): a sink that can stop, stops. */
  deliver(transition: Transition, signal?: AbortSignal): Promise<void>;
}

export class SinkError extends Error {
  override name = 'SinkError';
  /** The receiver asked to stop (410 Gone): no retry, the transition is dead-lettered at once. */
  readonly permanent: boolean;
  /** What the attempt came to, in words: `answered 400 Bad Request`, `no answer within 5 s`, `connection refused (ECONNREFUSED)`. */
  readonly outcome: string;
  constructor(message: string, options: { permanent?: boolean; outcome?: string } = {}) {
    super(message);
    this.permanent = options.permanent ?? false;
    this.outcome = options.outcome ?? message;
  }
}
