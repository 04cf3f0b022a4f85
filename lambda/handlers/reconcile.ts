/**
 * EventBridge-scheduled entry point: one reconcile run within the Lambda's
 * time, opened as every home opens it (app/reconcile/open.ts: each job routed
 * to its provider's poller, each provider's SDK loaded only where it has a
 * credential), its counts logged and published as metrics. What differs on
 * AWS is where the credentials are: Gemini's, OpenAI's, Anthropic's and Azure
 * OpenAI's keys in Secrets Manager (lambda/secrets.ts), Bedrock's the
 * function's own role.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { type Config, loadConfig, overdueAfterOf } from '../../app/config.ts';
import { createLogger } from '../../app/logger.ts';
import { CredentialHealth } from '../../app/reconcile/credentials.ts';
import { pollerOptionsOf } from '../../app/reconcile/gemini-settings.ts';
import { openReconciler, type Reconciler, type ReconcileSettings } from '../../app/reconcile/open.ts';
import { providerPollerSettingsOf } from '../../app/reconcile/providers.ts';
import type { ReconcileStats } from '../../app/reconcile/reconcile.ts';
import { labelledKeysOf } from '../../core/credentials.ts';
import type { ProviderName } from '../../core/lifecycle.ts';
import { neverLogged } from '../../core/redaction.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { secretSetting } from '../secrets.ts';
import { createMetrics, emfTelemetry } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();
const metrics = createMetrics();
const telemetry = emfTelemetry(metrics);
const { operations: store } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: { operations: operationsTable(config.TABLE_NAME) },
});
/** Stop taking new polls this long before the Lambda's own timeout. */
const SAFETY_MS = 15_000;

interface Opened {
  /** The credentials it was opened with: a rotated secret makes a new reconciler. */
  key: string;
  reconciler: Reconciler | undefined;
  /** Gemini's keys, and every other provider's, by label: the refused ones are said after each run. */
  gemini: CredentialHealth;
  providers: Map<ProviderName, CredentialHealth>;
}
let opened: Opened | undefined;

export const handler = async (_event: unknown, context: Context): Promise<ReconcileStats | { skipped: string }> => {
  let settings: ReconcileSettings;
  let key: string;
  try {
    ({ settings, key } = await settingsWithSecrets(config));
  } catch (error) {
    logger.error('reconcile skipped: the Agent Platform credentials cannot be read', { detail: (error as Error).message });
    return { skipped: 'invalid-credentials' };
  }
  if (opened?.key !== key) opened = await open(settings, key);
  if (!opened.reconciler) return { skipped: 'no-api-key' };
  const stats = await opened.reconciler(Math.max(1_000, context.getRemainingTimeInMillis() - SAFETY_MS));
  // A key a provider refuses is said by label (never the key): the alarms count them, the log lines name them.
  const refused = opened.gemini.refusedLabels();
  if (refused.length > 0) logger.error('Gemini refuses API keys: their jobs are not polled', { refused });
  metrics.addMetric('RefusedGeminiKeys', MetricUnit.Count, refused.length);
  let refusedElsewhere = 0;
  for (const [provider, health] of opened.providers) {
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
  return stats;
};

async function open(settings: ReconcileSettings, key: string): Promise<Opened> {
  const options = await settings.poller();
  const gemini = new CredentialHealth(options?.gemini?.keys?.map((labelled) => labelled.label) ?? []);
  const providers = new Map<ProviderName, CredentialHealth>();
  const keyHealth = (provider: ProviderName) => {
    const health = providers.get(provider) ?? new CredentialHealth([]);
    providers.set(provider, health);
    return health;
  };
  const reconciler = await openReconciler(settings, { store }, { logger, credentials: gemini, keyHealth, telemetry });
  return { key, reconciler, gemini, providers };
}

/**
 * Reconcile's settings with every secret read (each cached by lambda/secrets.ts): the settings the local homes
 * resolve from their environment (local/settings.ts), the keys from Secrets Manager. Throws where the Agent
 * Platform's credentials cannot be read.
 */
async function settingsWithSecrets(config: Config): Promise<{ settings: ReconcileSettings; key: string }> {
  const gemini = await pollerOptionsOf(config, (name) => secretSetting(config, name));
  const [openai, anthropic, azure] = await Promise.all(
    (['OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'AZURE_OPENAI_API_KEY'] as const).map((name) => secretSetting(config, name)),
  );
  neverLogged([openai, anthropic, azure, ...[openai, anthropic].flatMap((value) => pairsIn(value)?.map((pair) => pair.apiKey) ?? [])]);
  const providers = providerPollerSettingsOf({
    ...config,
    ...keysSetting('OPENAI', openai, config),
    ...keysSetting('ANTHROPIC', anthropic, config),
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
function keysSetting(provider: 'OPENAI' | 'ANTHROPIC', value: string | undefined, config: Config): Partial<Config> {
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
