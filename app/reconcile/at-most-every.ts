/**
 * The rhythm of reconcile's hourly chores (the webhook health check, the
 * discovery sweep): a chore runs at most once an interval, and after a
 * failure is tried again sooner, never thrown to the run that asked.
 */
/** Claims a shared chore for `forMs`: true when this instance is to run it. */
export type ClaimJob = (job: string, forMs: number) => Promise<boolean>;

export class AtMostEvery {
  private nextAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly intervalMs: number,
    private readonly retryMs: number,
    private readonly clock: () => number = Date.now,
    /** Where several instances share the chore (PostgreSQL): it runs on the one that claims it for the interval. */
    private readonly claim?: { job: string; claimJob: ClaimJob },
  ) {}

  /**
   * `work(now)` if it is due (and, shared, this instance claimed it): what it
   * returns; undefined when it was not due, another instance has it, or it
   * threw (given to `failed`).
   */
  async run<T>(work: (now: number) => Promise<T>, failed: (error: Error) => void): Promise<T | undefined> {
    const now = this.clock();
    if (now < this.nextAt) return undefined;
    try {
      if (this.claim && !(await this.claim.claimJob(this.claim.job, this.intervalMs))) {
        // Another instance does it this interval: look again after the retry delay (it may have stopped).
        this.nextAt = now + Math.min(this.retryMs, this.intervalMs);
        return undefined;
      }
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
