/**
 * API Gateway (HTTP API, payload v2) entry point: the webhooks (Gemini's,
 * OpenAI's and Azure OpenAI's, each with its own secrets) and the operations
 * routes. The composition root runs once per cold start; no provider's SDK is
 * in it (a delivery names its job, the reconcile function polls it).
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { handle } from 'hono/aws-lambda';
import { azureResourceOf, loadConfig } from '../../app/config.ts';
import { createApp } from '../../app/http/app.ts';
import { openAIDeliveries } from '../../app/http/routes/provider-webhooks.ts';
import { receiveWebhook } from '../../app/http/webhook.ts';
import { dynamicWebhooks, NotConfiguredError, WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { createLogger } from '../../app/logger.ts';
import { pollNow } from '../../app/reconcile/poll-now.ts';
import { InvalidSecretError, parseSigningSecrets } from '../../app/signing-secrets.ts';
import { historyTable, openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { secretSetting } from '../secrets.ts';
import { createMetrics, emfTelemetry, publishedAfter } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();
const { operations: store, history } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: {
    // The list of operations is read from the history table (engines/dynamodb/tables.ts).
    operations: operationsTable(config.TABLE_NAME, config.HISTORY_TABLE),
    history: config.HISTORY_TABLE ? historyTable(config.HISTORY_TABLE, config.HISTORY_RETENTION_DAYS) : undefined,
  },
});

const metrics = createMetrics();

/** What the operator is told to do, per webhook, when its secret is not configured. */
const SET_IT: Record<WebhookSecret, string> = {
  WEBHOOK_SIGNING_SECRETS:
    'set the WebhookSigningSecrets secret (its ARN is the WebhookSigningSecretArn output) to the whsec_ secret Gemini shows',
  OPENAI_WEBHOOK_SECRET:
    "name a secret in the construct's openai.webhookSecret and set it to the whsec_ secret OpenAI shows for the endpoint",
  AZURE_OPENAI_WEBHOOK_SECRET:
    "name a secret in the construct's azureOpenAI.webhookSecret and set it to the whsec_ secret of the resource's webhook",
};
type WebhookSecret = 'WEBHOOK_SIGNING_SECRETS' | 'OPENAI_WEBHOOK_SECRET' | 'AZURE_OPENAI_WEBHOOK_SECRET';

/**
 * One webhook's secrets, asked on every delivery (cached; past the cache at
 * most every 30 s when no secret matched): a rotated secret is picked up
 * without a restart. Entries that do not decode are skipped (the others keep
 * working), logged and counted once per value read; none at all is
 * `not-configured` (503: the sender keeps the delivery for later).
 */
function webhookSecrets(variable: WebhookSecret): (options?: { refresh?: boolean }) => Promise<readonly string[]> {
  let reportedInvalid: string | undefined;
  let reportedNotConfigured = false;
  const notConfigured = (why: string) => {
    if (!reportedNotConfigured) logger.error(`webhook signing secret not configured: ${why}; ${SET_IT[variable]}`, { variable });
    reportedNotConfigured = true;
    return new NotConfiguredError(`webhook signing secret not configured (${why})`);
  };
  return async (options = {}) => {
    const value = await secretSetting(config, variable, options);
    if (!value) throw notConfigured('no value');
    try {
      return parseSigningSecrets(value, {
        variable,
        onInvalid: (positions) => {
          if (reportedInvalid === value) return;
          reportedInvalid = value;
          logger.error('webhook signing secrets: entries skipped, not of the form whsec_<base64>', { variable, positions });
          metrics.addMetric('SigningSecretSkipped', MetricUnit.Count, positions.length);
          metrics.publishStoredMetrics();
        },
      });
    } catch (error) {
      if (error instanceof InvalidSecretError) throw notConfigured('no entry is of the form whsec_<base64>');
      throw error;
    }
  };
}

/** Loaded on the first verify-by-poll only: most deliveries are signed with the shared secret and never need it. */
let lambda: Promise<{ client: LambdaClient; sdk: typeof import('@aws-sdk/client-lambda') }> | undefined;
/** Wakes the reconcile function (asynchronously: the delivery is answered at once; a busy reconcile is retried by Lambda). */
async function wakeReconcile(): Promise<void> {
  if (!config.RECONCILE_FUNCTION_NAME) return; // the schedule picks the operation up on its next run
  lambda ??= import('@aws-sdk/client-lambda').then((sdk) => ({ client: new sdk.LambdaClient({}), sdk }));
  const { client, sdk } = await lambda;
  await client.send(
    new sdk.InvokeCommand({
      FunctionName: config.RECONCILE_FUNCTION_NAME,
      InvocationType: 'Event',
      Payload: '{"source":"verify-by-poll"}',
    }),
  );
}

// Published once per invocation (one request), after the answer is made.
const telemetry = emfTelemetry(metrics, { batched: true });
const webhookDeps = {
  store,
  receipts: store,
  unprocessable: store,
  pollNow: (operation: Parameters<typeof pollNow>[0]) => pollNow(operation, { store, wake: wakeReconcile }),
  jwtPollsPerMinute: config.TRACK_RATE_PER_MINUTE,
  logger,
  telemetry,
};
// OpenAI's and Azure OpenAI's deliveries: Standard Webhooks with their own secrets, read by providers/openai.
const azureResource = config.AZURE_OPENAI_ENDPOINT && azureResourceOf(config.AZURE_OPENAI_ENDPOINT);
const providerReceiver = (secrets: ReturnType<typeof webhookSecrets>, azure?: string) =>
  receiveWebhook({
    ...webhookDeps,
    verifier: new WebhookSignatureVerifier(secrets),
    map: openAIDeliveries({ queries: store, ...(azure && { azureResource: azure }) }),
  });
/** Without the resource's endpoint no Azure job can be named: each delivery is not-configured (503) until it is set. */
const noAzureEndpoint = async (): Promise<readonly string[]> => {
  throw new NotConfiguredError("AZURE_OPENAI_ENDPOINT is not set (the construct's azureOpenAI.endpoint)");
};

export const handler = publishedAfter(
  handle(
    createApp({
      ...webhookDeps,
      queries: store,
      ...(history && { history }),
      verifier: new WebhookSignatureVerifier(webhookSecrets('WEBHOOK_SIGNING_SECRETS'), dynamicWebhooks(config)),
      providerWebhooks: {
        openai: providerReceiver(webhookSecrets('OPENAI_WEBHOOK_SECRET')),
        'azure-openai': azureResource
          ? providerReceiver(webhookSecrets('AZURE_OPENAI_WEBHOOK_SECRET'), azureResource)
          : providerReceiver(noAzureEndpoint),
      },
    }),
  ),
  telemetry,
);
