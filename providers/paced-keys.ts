/**
 * The keys a provider's poller calls with, by label: each paced at its own
 * rate, each held back alone after a 429 for as long as the provider asked
 * (Retry-After), each refusal (401, 403) noted by label for the health answer,
 * never the key. What the OpenAI, Anthropic and Bedrock pollers share; each
 * reads its own SDK's errors.
 *
 * A provider's rate limits are per key (per organisation, in truth: keys of one
 * organisation share them, which pacing each key cannot see; the 429s then say so).
 */
import { type KeyHealth, type LabelledKey, PollFailedError } from './port.ts';

/** How long a key is held back after a 429 that named no time. */
export const DEFAULT_HOLD_SECONDS = 5;

export interface PacedKeysOptions {
  /** The provider's name, for messages. */
  provider: string;
  /** Each key's pace. */
  requestsPerSecond: number;
  keyHealth?: KeyHealth;
  /** Milliseconds since the epoch (default Date.now): tests move it. */
  clock?: () => number;
}

/** What a failed call said, as its SDK's error has it. */
export interface CallFailure {
  status?: number;
  /** A 429's wait, in seconds. */
  retryAfterSeconds?: number;
}

/** Keys held back after a 429, each until its Retry-After (DEFAULT_HOLD_SECONDS when the answer named none). */
export class KeyHolds {
  /** Until when each key is held back, in clock milliseconds. */
  private readonly until = new Map<string, number>();

  constructor(private readonly clock: () => number = Date.now) {}

  /** Holds `key` back after a 429 that asked for `retryAfterSeconds`. */
  hold(key: string, retryAfterSeconds?: number): void {
    this.until.set(key, this.clock() + (retryAfterSeconds ?? DEFAULT_HOLD_SECONDS) * 1000);
  }

  /** Whole seconds `key` is held back still (0: it may be asked). */
  heldFor(key: string): number {
    const until = this.until.get(key);
    if (until === undefined) return 0;
    const left = until - this.clock();
    if (left > 0) return Math.ceil(left / 1000);
    this.until.delete(key);
    return 0;
  }
}

export class PacedKeys {
  /** When each key's next call may go, in clock milliseconds. */
  private readonly nextAt = new Map<string, number>();
  /** The keys held back after a 429. */
  private readonly holds: KeyHolds;
  private readonly clock: () => number;

  constructor(
    private readonly keys: LabelledKey[],
    private readonly options: PacedKeysOptions,
  ) {
    if (keys.length === 0) throw new Error(`no ${options.provider} API key`);
    if (!(options.requestsPerSecond > 0)) throw new Error(`${options.provider}: requestsPerSecond must be above 0`);
    this.clock = options.clock ?? Date.now;
    this.holds = new KeyHolds(this.clock);
  }

  get labels(): string[] {
    return this.keys.map((key) => key.label);
  }

  /** The key labelled `label` (none: the first), or PollFailedError naming the label that has none here. */
  keyOf(label: string | undefined): LabelledKey {
    const key = label === undefined ? this.keys[0] : this.keys.find((k) => k.label === label);
    if (!key) throw new PollFailedError(`no ${this.options.provider} API key labelled ${JSON.stringify(label)} here`);
    return key;
  }

  /**
   * `call` with the key labelled `label`, at its turn: refused without a request while the key is held back after a
   * 429; its answer noting the key accepted, a 401 or 403 noting it refused, a 429 holding it back (`failureOf`
   * reads the SDK's error). The error is thrown on as it was.
   */
  async run<T>(label: string | undefined, call: (key: LabelledKey) => Promise<T>, failureOf: (error: unknown) => CallFailure): Promise<T> {
    const key = this.keyOf(label);
    this.refuseIfHeld(key.label);
    await this.turnOf(key.label);
    // A 429 may have come while this call waited its turn.
    this.refuseIfHeld(key.label);
    try {
      const answer = await call(key);
      this.options.keyHealth?.accepted(key.label);
      return answer;
    } catch (error) {
      const { status, retryAfterSeconds } = failureOf(error);
      if (status === 401 || status === 403) this.options.keyHealth?.refused(key.label, status);
      if (status === 429) this.holds.hold(key.label, retryAfterSeconds);
      throw error;
    }
  }

  private refuseIfHeld(label: string): void {
    const seconds = this.holds.heldFor(label);
    if (seconds === 0) return;
    throw new PollFailedError(
      `${this.options.provider} asked for a pause: the key labelled ${JSON.stringify(label)} is held back ${seconds} s more (429)`,
      429,
      seconds,
    );
  }

  /** Waits for the key's next slot and takes it: calls with one key go at most `requestsPerSecond`, whoever makes them. */
  private async turnOf(label: string): Promise<void> {
    const now = this.clock();
    const slot = Math.max(now, this.nextAt.get(label) ?? now);
    this.nextAt.set(label, slot + 1000 / this.options.requestsPerSecond);
    if (slot > now) await new Promise((resolve) => setTimeout(resolve, slot - now));
  }
}

/**
 * A 429's wait, in seconds, from its headers: `retry-after-ms` (OpenAI's and Anthropic's SDKs read it first), else
 * `retry-after` in seconds or as an HTTP date. Undefined when none says.
 */
export function retryAfterOf(headers: { get(name: string): string | null } | undefined, now = Date.now()): number | undefined {
  const ms = Number(headers?.get('retry-after-ms') ?? Number.NaN);
  if (Number.isFinite(ms) && ms >= 0) return ms / 1000;
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, (at - now) / 1000);
}

/**
 * fetch for the OpenAI and Anthropic SDKs, whose own retry would wait out a 429 inside the poll (up to a minute, the
 * key's other polls queued behind it): a 429 comes back marked `x-should-retry: false` (both SDKs obey it), so the
 * key is held back here instead while other keys go on. Everything else they retry once as before.
 */
export const fetchHoldingOn429: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  if (response.status !== 429) return response;
  const headers = new Headers(response.headers);
  headers.set('x-should-retry', 'false');
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
};
