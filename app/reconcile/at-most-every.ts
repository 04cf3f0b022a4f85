/**
 * The rhythm of reconcile's hourly chores (the webhook health check, the
 * discovery sweep): a chore runs at most once an interval, and after a
 * failure is tried again sooner, never thrown to the run that asked.
 */
export class AtMostEvery {
  private nextAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly intervalMs: number,
    private readonly retryMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  /** `work(now)` if it is due: what it returns; undefined when it was not due, or when it threw (given to `failed`). */
  async run<T>(work: (now: number) => Promise<T>, failed: (error: Error) => void): Promise<T | undefined> {
    const now = this.clock();
    if (now < this.nextAt) return undefined;
    try {
      const result = await work(now);
      this.nextAt = now + this.intervalMs;
      return result;
    } catch (error) {
      failed(error as Error);
      this.nextAt = now + this.retryMs;
      return undefined;
    }
  }
}
