/**
 * API Gateway (HTTP API, payload v2) entry point: the webhook and the
 * operations routes. The composition root runs once per cold start.
 */
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import { handle } from 'hono/aws-lambda';
import { ConfigError, loadConfig } from '../config.ts';
import { createApp } from '../http/app.ts';
import { parseSigningSecrets, WebhookSignatureVerifier } from '../http/webhook-signature.ts';
import { createLogger, createMetrics } from '../logger.ts';
import { createDocumentClient, createDynamoDbClient } from '../store/dynamodb.ts';
import { DynamoDbOperationStore } from '../store/dynamodb-operation-store.ts';

const config = loadConfig();
const logger = createLogger();
const store = new DynamoDbOperationStore(
  createDocumentClient(createDynamoDbClient({ endpoint: config.DYNAMODB_ENDPOINT })),
  config.TABLE_NAME,
);

/** Secrets Manager values are cached for 5 minutes, so a rotation lands without a deploy. */
async function signingSecrets(): Promise<readonly string[]> {
  if (config.WEBHOOK_SIGNING_SECRETS) return parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS);
  if (!config.WEBHOOK_SIGNING_SECRETS_ARN) throw new ConfigError('set WEBHOOK_SIGNING_SECRETS or WEBHOOK_SIGNING_SECRETS_ARN');
  const value = await getSecret(config.WEBHOOK_SIGNING_SECRETS_ARN, { maxAge: 300 });
  return parseSigningSecrets(String(value ?? ''));
}

export const handler = handle(
  createApp({ store, verifier: new WebhookSignatureVerifier(signingSecrets), logger, metrics: createMetrics() }),
);
