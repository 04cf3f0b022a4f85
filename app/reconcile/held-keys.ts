/**
 * A poller that holds a credential back after a 429, for every provider: the
 * provider+key that answered it is refused without a request until its
 * Retry-After (DEFAULT_HOLD_SECONDS when none was read), every other key going
 * on. OpenAI's, Anthropic's and Bedrock's pollers hold their own keys already
 * (providers/paced-keys.ts); Gemini's SDK hides the answer's headers, so here
 * its 429 holds the key for the default. Where many pollers run at once (the
 * AWS poll workers) each holds on its own 429: a limited key costs each worker
 * the polls in flight when the 429 came, not one per job; a worker hands a held
 * key's jobs back untouched, still due (lambda/reconcile/fanout.ts).
 */
import { type ProviderName, providerOf } from '../../core/lifecycle.ts';
import { DEFAULT_HOLD_SECONDS } from '../../providers/paced-keys.ts';
import type { PollAnswer, PollTarget } from '../../providers/port.ts';
import { type Poller, PollFailedError } from './poller.ts';

export class HeldKeys implements Poller {
  /** Until when each provider+key is held, in clock milliseconds. */
  private readonly heldUntil = new Map<string, number>();

  constructor(
    private readonly poller: Poller,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Seconds `provider`'s key labelled `credential` is held back still (0: it may be asked). */
  heldFor(provider: ProviderName, credential?: string): number {
    return Math.max(0, Math.ceil(((this.heldUntil.get(`${provider}#${credential ?? ''}`) ?? 0) - this.clock()) / 1000));
  }

  async poll(operation: PollTarget): Promise<PollAnswer> {
    const key = `${providerOf(operation.kind)}#${operation.credential ?? ''}`;
    const left = (this.heldUntil.get(key) ?? 0) - this.clock();
    if (left > 0) {
      const seconds = Math.ceil(left / 1000);
      throw new PollFailedError(`the provider asked for a pause: this key is held back ${seconds} s more (429)`, 429, seconds);
    }
    try {
      return await this.poller.poll(operation);
    } catch (error) {
      if (error instanceof PollFailedError && error.status === 429)
        this.heldUntil.set(key, this.clock() + (error.retryAfterSeconds ?? DEFAULT_HOLD_SECONDS) * 1000);
      throw error;
    }
  }
}
