/**
 * Reconcile as an instance runs it (app/instance.ts): one function that does a
 * bounded run through the same ingest as the webhook, every provider's jobs
 * routed to that provider's poller (providers.ts). Its settings are resolved
 * from the configuration once (local/settings.ts); each provider's SDK is
 * loaded only where it has a credential, so an application that polls
 * nothing never pays a load.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { PROVIDERS, type ProviderName } from '../../core/lifecycle.ts';
import type { OverdueLimits } from '../../core/overdue.ts';
import { geminiBatches } from '../../providers/gemini/events.ts';
import type { GenAiPoller, PollerOptions } from '../../providers/gemini/poller.ts';
import type { KeyHealth, ProviderPoller } from '../../providers/port.ts';
import type { Engine } from '../engine.ts';
import type { Telemetry } from '../telemetry.ts';
import { CredentialHealth } from './credentials.ts';
import { BatchDiscovery, type Discovery } from './discovery.ts';
import { CREDENTIAL_VARIABLES, openProviderPollers, type ProviderPollerSettings, ProviderRouter } from './providers.ts';
import { type ReconcileDeps, type ReconcileStats, reconcile } from './reconcile.ts';
import { WebhookHealth } from './webhook-health.ts';

export interface ReconcileSettings {
  intervalSeconds: number;
  /** Tracked names never observed stop being polled after this (TRACKED_EXPIRY_DAYS). */
  unseenExpiryMs: number;
  overdueAfter: OverdueLimits;
  /** Where Gemini is to send webhooks (WEBHOOK_URL): the webhook health check compares. */
  webhookUrl: string | undefined;
  /** Gemini's poller options with their secrets read (undefined: Gemini is not polled). */
  poller(): Promise<PollerOptions | undefined>;
  /** Every other provider polled here (providers/), with its credentials. */
  providers?: ProviderPollerSettings;
}

/** One reconcile run within `budgetMs`: the due polls, and discovery and the webhook health check when due. */
export type Reconciler = (budgetMs: number) => Promise<ReconcileStats>;

const OFF =
  'reconcile off: no provider has a credential here (GEMINI_API_KEY, GEMINI_API_KEYS or GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION; OPENAI_API_KEY; ANTHROPIC_API_KEY; AZURE_OPENAI_ENDPOINT and AZURE_OPENAI_API_KEY; AWS_REGION for Bedrock): webhooks still work; nothing is polled';

/** What a home polls with: every provider with a credential here, each job routed to its own (providers.ts). */
export interface OpenedPollers {
  poller: ProviderRouter;
  /** Gemini's poller, where the Gemini API or the Agent Platform is set up (its webhooks and batches listed too). */
  gemini?: GenAiPoller;
  options?: PollerOptions;
  others: Partial<Record<ProviderName, ProviderPoller>>;
}

type PollerDeps = { logger: Logger; credentials: CredentialHealth; keyHealth?: (provider: ProviderName) => KeyHealth };

/** The pollers `settings` give credentials for; undefined (and said once) where there is nothing to poll. */
export async function openPollers(settings: ReconcileSettings | undefined, deps: PollerDeps): Promise<OpenedPollers | undefined> {
  const { logger } = deps;
  const options = settings && (await settings.poller());
  const others = settings?.providers ?? {};
  if (!settings || (!options && Object.keys(others).length === 0)) return void logger.warn(OFF);
  const pollers = await openProviderPollers(others, (provider) => deps.keyHealth?.(provider) ?? new CredentialHealth([]));
  let gemini: GenAiPoller | undefined;
  if (options) {
    const { GenAiPoller } = await import('../../providers/gemini/poller.ts');
    gemini = new GenAiPoller({ ...options, credentialHealth: deps.credentials });
  }
  const poller = new ProviderRouter({ ...pollers, ...(gemini && { gemini }) });
  const unpolled = PROVIDERS.filter((provider) => !poller.providers.includes(provider));
  if (unpolled.length > 0)
    logger.info('providers not polled here: no credential', {
      providers: unpolled.map((provider) => `${provider} (${CREDENTIAL_VARIABLES[provider]})`),
    });
  return { poller, ...(gemini && { gemini }), ...(options && { options }), others: pollers };
}

/** Reconcile on `engine`; undefined (and said once) where there is nothing to poll. */
export async function openReconciler(
  settings: ReconcileSettings | undefined,
  // What reconcile reads and writes of an engine (the AWS function opens its table alone, no Engine around it).
  engine: { store: ReconcileDeps['store'] } & Pick<Engine, 'claimJob' | 'clock'>,
  deps: PollerDeps & { telemetry?: Telemetry; handOff?: ReconcileDeps['handOff'] },
): Promise<Reconciler | undefined> {
  const { logger } = deps;
  // No settings at all (npm start with no provider's credential) is said too: openPollers says why nothing is polled.
  const opened = await openPollers(settings, deps);
  if (!settings || !opened) return undefined;
  const { poller, gemini, options, others: pollers } = opened;
  const { store, claimJob, clock } = engine;
  // The webhook health check is the Gemini API's (the Agent Platform sends no webhooks and lists nothing here).
  // On several instances (PostgreSQL) each hourly chore runs on the one that claims it.
  const health =
    gemini && options?.gemini && new WebhookHealth({ webhooks: gemini.webhooks, webhookUrl: settings.webhookUrl, logger, claimJob });
  // Batches nobody tracked, for each provider that lists its key's batches.
  const sweeps = [
    ...(gemini && options?.gemini
      ? [new BatchDiscovery({ lister: geminiBatches(gemini), store, logger, claimJob, credentials: gemini.labels })]
      : []),
    ...PROVIDERS.flatMap((provider) => {
      const other = pollers[provider];
      if (provider === 'gemini' || !other?.listBatches) return [];
      const lister = { listBatches: other.listBatches.bind(other) };
      return [new BatchDiscovery({ lister, provider, store, logger, claimJob, credentials: other.labels.filter(Boolean) })];
    }),
  ];
  return (budgetMs) =>
    reconcile({
      store,
      poller,
      health,
      discovery: sweeps.length > 0 ? allOf(sweeps) : undefined,
      logger,
      intervalSeconds: settings.intervalSeconds,
      budgetMs,
      unseenExpiryMs: settings.unseenExpiryMs,
      overdueAfter: settings.overdueAfter,
      ...(clock && { clock }),
      ...(deps.telemetry && { telemetry: deps.telemetry }),
      ...(deps.handOff && { handOff: deps.handOff }),
    });
}

/** Every provider's discovery as one: each sweeps when due, their counts added. */
function allOf(sweeps: BatchDiscovery[]): Discovery {
  return {
    async sweepIfDue() {
      const results = (await Promise.all(sweeps.map((sweep) => sweep.sweepIfDue()))).filter((result) => result !== undefined);
      if (results.length === 0) return undefined;
      return results.reduce((sum, result) => ({
        adopted: sum.adopted + result.adopted,
        listed: sum.listed + result.listed,
        pages: sum.pages + result.pages,
      }));
    },
  };
}
