/**
 * Is Gemini still calling us? Gemini turns a static webhook off
 * (`disabled_due_to_failed_deliveries`) after deliveries keep failing, and
 * says so nowhere else. At most once an interval (an hour) reconcile lists the
 * key's webhooks and counts the disabled ones that point at this deployment;
 * between checks the last count is reported again, so an alarm on it holds.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { WebhookLister } from '../../providers/gemini/poller.ts';
import { AtMostEvery, type ClaimJob } from './at-most-every.ts';

export const DISABLED_STATE = 'disabled_due_to_failed_deliveries';
export const HEALTH_CHECK_INTERVAL_MS = 60 * 60_000;
/** After a failed check (Gemini down, a key without access to webhooks), the next try. */
export const HEALTH_CHECK_RETRY_MS = 5 * 60_000;

export interface WebhookHealthDeps {
  webhooks: WebhookLister;
  /** This deployment's webhook URL; unset: every webhook of the key counts. */
  webhookUrl?: string;
  logger: Logger;
  clock?: () => number;
  intervalMs?: number;
  /** Several instances: the check runs on the one that claims it. */
  claimJob?: ClaimJob;
}

export class WebhookHealth {
  private readonly schedule: AtMostEvery;
  private disabled?: number;

  constructor(private readonly deps: WebhookHealthDeps) {
    this.schedule = new AtMostEvery(
      deps.intervalMs ?? HEALTH_CHECK_INTERVAL_MS,
      HEALTH_CHECK_RETRY_MS,
      deps.clock,
      deps.claimJob && { job: 'webhook-health', claimJob: deps.claimJob },
    );
  }

  /**
   * The number of disabled webhooks pointing here, checked if the last check is
   * an interval old; undefined while no check has succeeded. A failed check
   * is logged and tried again after HEALTH_CHECK_RETRY_MS, never thrown.
   */
  async disabledWebhooks(): Promise<number | undefined> {
    const { logger } = this.deps;
    await this.schedule.run(
      async () => {
        const mine = (await this.listAll()).filter((hook) => !this.deps.webhookUrl || hook.uri === this.deps.webhookUrl);
        const disabled = mine.filter((hook) => hook.state === DISABLED_STATE);
        if (disabled.length > 0) {
          logger.error('Gemini disabled webhook(s) pointing here after failed deliveries; fix the cause, then run npm run connect', {
            webhooks: disabled.map((hook) => hook.id),
            state: DISABLED_STATE,
          });
        } else {
          logger.info('webhook health checked', { webhooks: mine.length, disabled: 0 });
        }
        this.disabled = disabled.length;
      },
      (error) => logger.warn('webhook health check failed; tried again later', { detail: error.message }),
    );
    return this.disabled;
  }

  private async listAll(): Promise<Array<{ id?: string; uri?: string; state?: string }>> {
    const all = [];
    let pageToken: string | undefined;
    for (let page = 0; page < 20; page++) {
      const answer = await this.deps.webhooks.list(pageToken ? { page_token: pageToken } : {});
      all.push(...(answer.webhooks ?? []));
      pageToken = answer.next_page_token || undefined; // "" is no next page
      if (!pageToken) break;
    }
    return all;
  }
}
