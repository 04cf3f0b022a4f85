/**
 * Reconcile as an instance runs it (app/instance.ts): one function that does a
 * bounded run through the same ingest as the webhook. Its settings are
 * resolved from the configuration once (local/settings.ts); the Gemini SDK is
 * loaded only where something is to be polled, so an application that polls
 * nothing never pays its load.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { OverdueLimits } from '../../core/overdue.ts';
import type { Engine } from '../engine.ts';
import type { Telemetry } from '../telemetry.ts';
import type { CredentialHealth } from './credentials.ts';
import { BatchDiscovery } from './discovery.ts';
import type { PollerOptions } from './gemini-poller.ts';
import { type ReconcileStats, reconcile } from './reconcile.ts';
import { WebhookHealth } from './webhook-health.ts';

export interface ReconcileSettings {
  intervalSeconds: number;
  /** Tracked names never observed stop being polled after this (TRACKED_EXPIRY_DAYS). */
  unseenExpiryMs: number;
  overdueAfter: OverdueLimits;
  /** Where Gemini is to send webhooks (WEBHOOK_URL): the webhook health check compares. */
  webhookUrl: string | undefined;
  /** The poller's options with their secrets read (undefined: nothing to poll after all). */
  poller(): Promise<PollerOptions | undefined>;
}

/** One reconcile run within `budgetMs`: the due polls, and discovery and the webhook health check when due. */
export type Reconciler = (budgetMs: number) => Promise<ReconcileStats>;

const OFF =
  'reconcile off: neither GEMINI_API_KEY nor GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION are set (nor GEMINI_API_KEYS; webhooks still work; nothing is polled)';

/** Reconcile on `engine`; undefined (and said once) where there is nothing to poll. */
export async function openReconciler(
  settings: ReconcileSettings | undefined,
  engine: Pick<Engine, 'store' | 'claimJob' | 'clock'>,
  deps: { logger: Logger; credentials: CredentialHealth; telemetry?: Telemetry },
): Promise<Reconciler | undefined> {
  const { logger } = deps;
  const options = settings && (await settings.poller());
  if (!settings || !options) return void logger.warn(OFF);
  const { store, claimJob, clock } = engine;
  const { GenAiPoller } = await import('./gemini-poller.ts');
  const poller = new GenAiPoller({ ...options, credentialHealth: deps.credentials });
  // The webhook health check and discovery are the Gemini API's (the Agent Platform sends no webhooks and lists nothing here).
  // On several instances (PostgreSQL) each hourly chore runs on the one that claims it.
  const health = options.gemini && new WebhookHealth({ webhooks: poller.webhooks, webhookUrl: settings.webhookUrl, logger, claimJob });
  const discovery = options.gemini && new BatchDiscovery({ lister: poller, store, logger, claimJob, credentials: poller.labels });
  return (budgetMs) =>
    reconcile({
      store,
      poller,
      health,
      discovery,
      logger,
      intervalSeconds: settings.intervalSeconds,
      budgetMs,
      unseenExpiryMs: settings.unseenExpiryMs,
      overdueAfter: settings.overdueAfter,
      ...(clock && { clock }),
      ...(deps.telemetry && { telemetry: deps.telemetry }),
    });
}
