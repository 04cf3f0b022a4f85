/**
 * API Gateway (HTTP API, payload v2) entry point: the webhook and the
 * operations routes. The composition root runs once per cold start.
 */
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { handle } from 'hono/aws-lambda';
import { loadConfig } from '../../app/config.ts';
import { createApp } from '../../app/http/app.ts';
import { dynamicWebhooks, NotConfiguredError, WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { createLogger } from '../../app/logger.ts';
import { pollNow } from '../../app/reconcile/poll-now.ts';
import { InvalidSecretError, parseSigningSecrets } from '../../app/signing-secrets.ts';
import { historyTable, openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { secretSetting } from '../secrets.ts';
import { createMetrics, emfTelemetry } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();
const { operations: store, history } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: {
    operations: operationsTable(config.TABLE_NAME),
    history: config.HISTORY_TABLE ? historyTable(config.HISTORY_TABLE, config.HISTORY_RETENTION_DAYS) : undefined,
  },
});

const metrics = createMetrics();
let reportedInvalid: string | undefined;
let reportedNotConfigured = false;
const SET_IT = 'set the WebhookSigningSecrets secret (its ARN is the WebhookSigningSecretArn output) to the whsec_ secret Gemini shows';

function notConfigured(why: string): NotConfiguredError {
  if (!reportedNotConfigured) logger.error(`webhook signing secret not configured: ${why}; ${SET_IT}`);
  reportedNotConfigured = true;
  return new NotConfiguredError(`webhook signing secret not configured (${why})`);
}

/**
 * Asked on every delivery (cached; past the cache at most every 30 s when no
 * secret matched): a rotated secret is picked up without a restart.
 * Entries that do not decode are skipped (the others keep working), logged
 * and counted once per value read.
 */
async function signingSecrets(options: { refresh?: boolean } = {}): Promise<readonly string[]> {
  const value = await secretSetting(config, 'WEBHOOK_SIGNING_SECRETS', options);
  if (!value) throw notConfigured('no value');
  return parseSigningSecretsOrNotConfigured(value);
}

function parseSigningSecretsOrNotConfigured(value: string): string[] {
  try {
    return parseSigningSecrets(value, {
      onInvalid: (positions) => {
        if (reportedInvalid === value) return;
        reportedInvalid = value;
        logger.error('webhook signing secrets: entries skipped, not of the form whsec_<base64>', { positions });
        metrics.addMetric('SigningSecretSkipped', MetricUnit.Count, positions.length);
        metrics.publishStoredMetrics();
      },
    });
  } catch (error) {
    if (error instanceof InvalidSecretError) throw notConfigured('no entry is of the form whsec_<base64>');
    throw error;
  }
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

export const handler = handle(
  createApp({
    store,
    queries: store,
    ...(history && { history }),
    receipts: store,
    unprocessable: store,
    verifier: new WebhookSignatureVerifier(signingSecrets, dynamicWebhooks(config)),
    pollNow: (operation) => pollNow(operation, { store, wake: wakeReconcile }),
    jwtPollsPerMinute: config.TRACK_RATE_PER_MINUTE,
    logger,
    telemetry: emfTelemetry(metrics),
  }),
);
