/**
 * EventBridge-scheduled entry point: one reconcile run within the Lambda's
 * time, counts logged and published as metrics.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context } from 'aws-lambda';
import { loadConfig, overdueAfterOf } from '../../app/config.ts';
import { createLogger } from '../../app/logger.ts';
import { BatchDiscovery, geminiBatches } from '../../app/reconcile/discovery.ts';
import { GenAiPoller, pollerOptionsOf } from '../../app/reconcile/gemini-poller.ts';
import { type ReconcileStats, reconcile } from '../../app/reconcile/reconcile.ts';
import { WebhookHealth } from '../../app/reconcile/webhook-health.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { secretSetting } from '../secrets.ts';
import { createMetrics, emfTelemetry } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();
const metrics = createMetrics();
const { operations: store } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: { operations: operationsTable(config.TABLE_NAME) },
});
/** Stop taking new polls this long before the Lambda's own timeout. */
const SAFETY_MS = 15_000;

let poller: { key: string; poller: GenAiPoller; health?: WebhookHealth; discovery?: BatchDiscovery } | undefined;

export const handler = async (_event: unknown, context: Context): Promise<ReconcileStats | { skipped: string }> => {
  let options: Awaited<ReturnType<typeof pollerOptionsOf>>;
  try {
    options = await pollerOptionsOf(config, (name) => secretSetting(config, name));
  } catch (error) {
    logger.error('reconcile skipped: the Agent Platform credentials cannot be read', { detail: (error as Error).message });
    return { skipped: 'invalid-credentials' };
  }
  if (!options) {
    logger.warn(
      'reconcile skipped: no Gemini API key (set the GeminiApiKey secret: one key, or label=key pairs) and no Agent Platform project',
    );
    return { skipped: 'no-api-key' };
  }
  // Credentials rotate in their secrets: a new value makes a new poller.
  const key = JSON.stringify(options);
  if (poller?.key !== key) {
    const gemini = new GenAiPoller(options);
    poller = {
      key,
      poller: gemini,
      ...(options.gemini && {
        health: new WebhookHealth({ webhooks: gemini.webhooks, webhookUrl: config.WEBHOOK_URL, logger }),
        discovery: new BatchDiscovery({ lister: geminiBatches(gemini), store, logger, credentials: gemini.labels }),
      }),
    };
  }
  const stats = await reconcile({
    store,
    poller: poller.poller,
    health: poller.health,
    discovery: poller.discovery,
    logger,
    intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
    budgetMs: Math.max(1_000, context.getRemainingTimeInMillis() - SAFETY_MS),
    unseenExpiryMs: config.TRACKED_EXPIRY_DAYS * 86_400_000,
    overdueAfter: overdueAfterOf(config),
    telemetry: emfTelemetry(metrics),
  });
  // A key Gemini refuses is said by label (never the key): the alarm on RefusedGeminiKeys names none, the log line does.
  const refused = poller.poller.credentials.refusedLabels();
  if (refused.length > 0) logger.error('Gemini refuses API keys: their jobs are not polled', { refused });
  metrics.addMetric('RefusedGeminiKeys', MetricUnit.Count, refused.length);
  for (const [name, value] of Object.entries(stats)) {
    if (value === undefined) continue;
    const unit = name.endsWith('Seconds') ? MetricUnit.Seconds : MetricUnit.Count;
    metrics.addMetric(`Reconcile${name[0]?.toUpperCase()}${name.slice(1)}`, unit, value);
  }
  metrics.publishStoredMetrics();
  return stats;
};
