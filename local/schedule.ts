/**
 * The local stand-in for an EventBridge schedule: runs a task every period,
 * never two at once, first run right away.
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

  start(): void {
    const tick = async () => {
      if (this.stopped) return;
      this.running = this.task().catch((error) => this.logger.error('scheduled run failed', { error }));
      await this.running;
      if (!this.stopped) this.timer = setTimeout(tick, this.periodMs);
    };
    void tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }
}
