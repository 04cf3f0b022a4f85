/**
 * The local stand-in for an EventBridge schedule: runs a task every period,
 * never two at once, first run right away; `runSoon` for an extra run.
 */
import type { Logger } from '@aws-lambda-powertools/logger';

export class LocalSchedule {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;
  private stopped = false;

  constructor(
    private readonly periodMs: number,
    private readonly task: () => Promise<unknown>,
    private readonly logger: Logger,
  ) {}

  private busy = false;
  private again = false;

  start(): void {
    void this.tick();
  }

  /** An extra run now, or right after the one under way (as an extra invocation of the Lambda would). */
  runSoon(): void {
    if (this.stopped) return;
    if (this.busy) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    void this.tick();
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    this.busy = true;
    do {
      this.again = false;
      this.running = this.task().catch((error) => this.logger.error('scheduled run failed', { error }));
      await this.running;
    } while (this.again && !this.stopped);
    this.busy = false;
    if (!this.stopped) this.timer = setTimeout(() => void this.tick(), this.periodMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}

/** What each part keeps past its retention goes, at start and hourly (DynamoDB's TTL, on this engine). */
export function everyHour(
  logger: Logger,
  tasks: Array<() => unknown>,
  /** Where several instances share the work: run only when this one claims the hour's round. */
  claimJob?: (job: string, forMs: number) => Promise<boolean>,
): NodeJS.Timeout {
  const run = async () => {
    if (claimJob && !(await claimJob('maintenance', 3_300_000).catch(() => false))) return;
    await maintain(tasks, logger);
  };
  void run();
  return setInterval(() => void run(), 3600_000).unref();
}

/** Each pruning task in turn; one that fails is logged and the others still run. */
export async function maintain(tasks: Array<() => unknown>, logger: Pick<Logger, 'warn'>): Promise<void> {
  for (const task of tasks) {
    try {
      await task();
    } catch (error) {
      logger.warn('maintenance: old rows not removed this time', { error: (error as Error).message });
    }
  }
}
