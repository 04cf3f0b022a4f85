/**
 * What both halves of reconcile on AWS open with: the settings every home
 * resolves from its environment (local/settings.ts), the keys from Secrets
 * Manager (lambda/secrets.ts, each cached), and each provider's refused keys
 * said after a run (by label, never the key) and counted for the alarms.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { type Config, overdueAfterOf } from '../../app/config.ts';
import { CredentialHealth } from '../../app/reconcile/credentials.ts';
import { pollerOptionsOf } from '../../app/reconcile/gemini-settings.ts';
import type { ReconcileSettings } from '../../app/reconcile/open.ts';
import { providerPollerSettingsOf } from '../../app/reconcile/providers.ts';
import type { ReconcileStats } from '../../app/reconcile/reconcile.ts';
import { labelledKeysOf } from '../../core/credentials.ts';
import type { ProviderName } from '../../core/lifecycle.ts';
import { neverLogged } from '../../core/redaction.ts';
import { secretSetting } from '../secrets.ts';

/** Each provider's keys by label, as the pollers note their answers. */
export interface KeyHealths {
  gemini: CredentialHealth;
  providers: Map<ProviderName, CredentialHealth>;
  keyHealth: (provider: ProviderName) => CredentialHealth;
}

export function keyHealthsOf(geminiLabels: string[]): KeyHealths {
  const providers = new Map<ProviderName, CredentialHealth>();
  return {
    gemini: new CredentialHealth(geminiLabels),
    providers,
    keyHealth: (provider) => {
      const health = providers.get(provider) ?? new CredentialHealth([]);
      providers.set(provider, health);
      return health;
    },
  };
}

/** The refused keys said by label, and a run's counts published as `Reconcile<Count>` metrics. */
export function publishRun(metrics: Metrics, logger: Logger, healths: KeyHealths, stats: Partial<ReconcileStats>): void {
  const refused = healths.gemini.refusedLabels();
  if (refused.length > 0) logger.error('Gemini refuses API keys: their jobs are not polled', { refused });
  metrics.addMetric('RefusedGeminiKeys', MetricUnit.Count, refused.length);
  let refusedElsewhere = 0;
  for (const [provider, health] of healths.providers) {
    const labels = health.refusedLabels();
    refusedElsewhere += labels.length;
    if (labels.length > 0) logger.error(`${provider} refuses API keys: their jobs are not polled`, { provider, refused: labels });
  }
  metrics.addMetric('RefusedProviderKeys', MetricUnit.Count, refusedElsewhere);
  for (const [name, value] of Object.entries(stats)) {
    if (value === undefined) continue;
    const unit = name.endsWith('Seconds') ? MetricUnit.Seconds : MetricUnit.Count;
    metrics.addMetric(`Reconcile${name[0]?.toUpperCase()}${name.slice(1)}`, unit, value);
  }
  metrics.publishStoredMetrics();
}

/**
 * Reconcile's settings with every secret read (each cached by lambda/secrets.ts): the settings the local homes
 * resolve from their environment (local/settings.ts), the keys from Secrets Manager. Throws where the Agent
 * Platform's credentials cannot be read.
 */
export async function settingsWithSecrets(config: Config, logger: Logger): Promise<{ settings: ReconcileSettings; key: string }> {
  const gemini = await pollerOptionsOf(config, (name) => secretSetting(config, name));
  const [openai, anthropic, azure] = await Promise.all(
    (['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'AZURE_OPENAI_API_KEY'] as const).map((name) => secretSetting(config, name)),
  );
  neverLogged([openai, anthropic, azure, ...[openai, anthropic].flatMap((value) => pairsIn(value)?.map((pair) => pair.apiKey) ?? [])]);
  const providers = providerPollerSettingsOf({
    ...config,
    ...keysSetting('OPENAI', openai, config, logger),
    ...keysSetting('ANTHROPIC', anthropic, config, logger),
    ...(azure && { AZURE_OPENAI_API_KEY: azure }),
  });
  const settings: ReconcileSettings = {
    intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
    unseenExpiryMs: config.TRACKED_EXPIRY_DAYS * 86_400_000,
    overdueAfter: overdueAfterOf(config),
    // Its hourly health check looks at the Gemini webhooks that point here.
    webhookUrl: config.WEBHOOK_URL,
    poller: async () => gemini,
    providers,
  };
  return { settings, key: JSON.stringify({ gemini, providers }) };
}

/** A provider's key secret as its variables: one key (`*_API_KEY`) or label=key pairs (`*_API_KEYS`), as Gemini's secret. */
function keysSetting(provider: 'OPENAI' | 'ANTHROPIC', value: string | undefined, config: Config, logger: Logger): Partial<Config> {
  if (value === undefined || config[`${provider}_API_KEYS`]) return {};
  if (!value.includes('=')) return { [`${provider}_API_KEY`]: value };
  if (!pairsIn(value)) {
    logger.error(`the ${provider} API key secret holds neither one key nor label=key pairs: its jobs are not polled`, {
      variable: `${provider}_API_KEY`,
    });
    return {};
  }
  return { [`${provider}_API_KEY`]: undefined, [`${provider}_API_KEYS`]: value };
}

function pairsIn(value: string | undefined) {
  return value?.includes('=') ? labelledKeysOf(value) : undefined;
}
