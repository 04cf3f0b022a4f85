/**
 * Effects-queue entry point (SQS FIFO, one message group per operation, fed
 * by the Pipe from the table's stream): applied state changes -> sinks
 * (EventBridge bus, signed outbound webhook). Composed on the first
 * invocation, and again whenever the outbound webhook's settings change. The
 * webhook sink and its signing library load only when the webhook is on.
 */
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import type { SQSEvent } from 'aws-lambda';
import { ConfigError, loadConfig } from '../../app/config.ts';
import { retrySettings } from '../../app/effects/queue.ts';
import type { EffectSink } from '../../app/effects/sinks.ts';
import { createLogger } from '../../app/logger.ts';
import { deadLettersTable, ledgerTable, openDynamoDb } from '../../engines/dynamodb/index.ts';
import { EventBridgeSink } from '../effects/eventbridge-sink.ts';
import { createEffectsHandler, type EffectsHandler } from '../effects/process.ts';
import { SqsRetryScheduler } from '../effects/sqs-retry-scheduler.ts';
import { secretSetting } from '../secrets.ts';
import { createMetrics, emfTelemetry, publishedAfter } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();

/**
 * The outbound webhook's settings, read on every invocation (Secrets Manager
 * values are cached): `npm run connect` turns the sink on, or changes its URL
 * or secret, without a deploy. No URL: the sink is off.
 */
async function webhookSettings(): Promise<{ url: string; secret: string } | undefined> {
  const url = await secretSetting(config, 'EFFECTS_WEBHOOK_URL');
  if (!url) return undefined;
  if (!/^https?:\/\//.test(url) || !URL.canParse(url)) throw new ConfigError('EFFECTS_WEBHOOK_URL is not an http(s) URL');
  const value = await secretSetting(config, 'EFFECTS_SIGNING_SECRET');
  if (!value) throw new ConfigError('EFFECTS_SIGNING_SECRET is not configured: set the EffectsSigningSecret secret to a whsec_ value');
  const { effectsSigningSecretOf } = await import('../../app/effects/webhook-sink.ts');
  return { url, secret: effectsSigningSecretOf(value, { skipInvalid: true }) };
}

async function compose(webhook: { url: string; secret: string } | undefined): Promise<EffectsHandler> {
  const sinks: EffectSink[] = [];
  if (config.EVENT_BUS_NAME) sinks.push(new EventBridgeSink(new EventBridgeClient({}), config.EVENT_BUS_NAME));
  if (webhook) {
    const { WebhookSink } = await import('../../app/effects/webhook-sink.ts');
    sinks.push(new WebhookSink(webhook.url, webhook.secret, { timeoutMs: config.EFFECTS_WEBHOOK_TIMEOUT_MS }));
  }
  if (!config.EFFECTS_LEDGER_TABLE) throw new ConfigError('EFFECTS_LEDGER_TABLE is not set');
  if (!config.EFFECTS_DEAD_LETTER_TABLE) throw new ConfigError('EFFECTS_DEAD_LETTER_TABLE is not set');
  const { ledger, deadLetters } = openDynamoDb({
    endpoint: config.DYNAMODB_ENDPOINT,
    tables: { ledger: ledgerTable(config.EFFECTS_LEDGER_TABLE), deadLetters: deadLettersTable(config.EFFECTS_DEAD_LETTER_TABLE) },
  });
  if (!config.EFFECTS_QUEUE_URL) throw new ConfigError('EFFECTS_QUEUE_URL is not set');
  const queue = new SqsRetryScheduler(config.EFFECTS_QUEUE_URL);
  const metrics = createMetrics();
  // Every effect's counts and lags published once per batch, at its end.
  const telemetry = emfTelemetry(metrics, { batched: true });
  const handler = createEffectsHandler({
    sinks,
    ledger,
    deadLetters,
    queue,
    retry: retrySettings(config),
    logger,
    metrics,
    telemetry,
  });
  return publishedAfter(handler, telemetry);
}

let composed: { key: string; handler: EffectsHandler } | undefined;

export const handler = async (event: SQSEvent) => {
  let webhook: Awaited<ReturnType<typeof webhookSettings>>;
  try {
    webhook = await webhookSettings();
  } catch (error) {
    // Not configured yet: fail the invocation, so the queue keeps every effect and offers it again later.
    logger.error('effects waiting: not configured; the queue keeps them and offers them again', { detail: (error as Error).message });
    throw error;
  }
  const key = webhook ? `${webhook.url} ${webhook.secret}` : '';
  if (composed?.key !== key) composed = { key, handler: await compose(webhook) };
  return composed.handler(event);
};
