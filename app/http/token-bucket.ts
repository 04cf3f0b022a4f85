/**
 * A rate per key: each key may take `perWindow` at once, and earns them back
 * evenly over `windowMs`. Keys that are full again are forgotten, so the map
 * holds only the keys that are limiting someone.
 */
export class TokenBucket {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly perWindow: number,
    private readonly windowMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** 0 when `key` may go ahead (one taken); otherwise how many ms until it may. */
  take(key: string): number {
    const now = this.clock();
    const rate = this.perWindow / this.windowMs;
    const held = this.buckets.get(key);
    const tokens = held ? Math.min(this.perWindow, held.tokens + (now - held.at) * rate) : this.perWindow;
    if (tokens < 1) {
      this.buckets.set(key, { tokens, at: now });
      return Math.ceil((1 - tokens) / rate);
    }
    this.buckets.set(key, { tokens: tokens - 1, at: now });
    if (this.buckets.size > 10_000) this.forgetFull(now, rate);
    return 0;
  }

  private forgetFull(now: number, rate: number): void {
    for (const [key, held] of this.buckets) if (held.tokens + (now - held.at) * rate >= this.perWindow) this.buckets.delete(key);
  }
}
