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
import { KeyHolds } from '../../providers/paced-keys.ts';
import type { PollAnswer, PollTarget } from '../../providers/port.ts';
import { type Poller, PollFailedError } from './poller.ts';

export class HeldKeys implements Poller {
  /** Each provider+key held back after a 429. */
  private readonly holds: KeyHolds;

  constructor(
    private readonly poller: Poller,
    clock: () => number = Date.now,
  ) {
    this.holds = new KeyHolds(clock);
  }

  /** Seconds `provider`'s key labelled `credential` is held back still (0: it may be asked). */
  heldFor(provider: ProviderName, credential?: string): number {
    return this.holds.heldFor(keyOf(provider, credential));
  }

  async poll(operation: PollTarget): Promise<PollAnswer> {
    const key = keyOf(providerOf(operation.kind), operation.credential);
    const seconds = this.holds.heldFor(key);
    if (seconds > 0)
      throw new PollFailedError(`the provider asked for a pause: this key is held back ${seconds} s more (429)`, 429, seconds);
    try {
      return await this.poller.poll(operation);
    } catch (error) {
      if (error instanceof PollFailedError && error.status === 429) this.holds.hold(key, error.retryAfterSeconds);
      throw error;
    }
  }
}

/** A provider's key labelled `credential` (none: its only key), as one hold. */
const keyOf = (provider: ProviderName, credential?: string) => `${provider}#${credential ?? ''}`;
