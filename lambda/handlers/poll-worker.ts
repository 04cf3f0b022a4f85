/**
 * The poll worker: Lambda's SQS event source hands it batches of the poll
 * queue's messages (each one provider+key's due jobs, from the dispatcher,
 * lambda/handlers/reconcile.ts), at most the mapping's MaximumConcurrency at
 * once. Each job is leased and polled through every home's reconcile code
 * (lambda/reconcile/fanout.ts), each key held back alone after a 429
 * (app/reconcile/held-keys.ts); the messages it could not take are reported
 * failed (ReportBatchItemFailures). Its counts are published as reconcile's.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { loadConfig } from '../../app/config.ts';
import { createLogger } from '../../app/logger.ts';
import { HeldKeys } from '../../app/reconcile/held-keys.ts';
import type { ReconcileSettings } from '../../app/reconcile/open.ts';
import { openPollers } from '../../app/reconcile/open.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { pollMessages } from '../reconcile/fanout.ts';
import { POLLS_AT_ONCE } from '../reconcile/fanout-settings.ts';
import { type KeyHealths, keyHealthsOf, publishRun, settingsWithSecrets } from '../reconcile/settings.ts';
import { createMetrics, emfTelemetry } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();
const metrics = createMetrics();
const telemetry = emfTelemetry(metrics);
const { operations: store } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: { operations: operationsTable(config.TABLE_NAME) },
});
/** A lease outlives the invocation by this much: a job whose poll is still answering is not handed out again. */
const LEASE_MARGIN_MS = 15_000;
/** Stop starting polls this long before the Lambda's own timeout. */
const SAFETY_MS = 5_000;

interface Opened {
  key: string;
  settings: ReconcileSettings;
  poller: HeldKeys | undefined;
  healths: KeyHealths;
}
let opened: Opened | undefined;

export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
  const found = await settingsWithSecrets(config, logger);
  if (opened?.key !== found.key) {
    const options = await found.settings.poller();
    const healths = keyHealthsOf(options?.gemini?.keys?.map((labelled) => labelled.label) ?? []);
    const pollers = await openPollers(found.settings, { logger, credentials: healths.gemini, keyHealth: healths.keyHealth });
    // Held across warm invocations: this worker asks a limited key nothing until its Retry-After.
    opened = { key: found.key, settings: found.settings, poller: pollers && new HeldKeys(pollers.poller), healths };
  }
  const { settings, poller } = opened;
  // Nothing to poll with here: the jobs' leases are not taken, they stay due (the dispatcher said why once).
  if (!poller) return { batchItemFailures: [] };
  const remaining = context.getRemainingTimeInMillis();
  const { stats, batchItemFailures } = await pollMessages(event.Records, {
    store,
    poller,
    heldFor: (provider, credential) => poller.heldFor(provider, credential),
    logger,
    telemetry,
    intervalSeconds: settings.intervalSeconds,
    unseenExpiryMs: settings.unseenExpiryMs,
    budgetMs: Math.max(1_000, remaining - SAFETY_MS),
    leaseMs: remaining + LEASE_MARGIN_MS,
    concurrency: POLLS_AT_ONCE,
  });
  logger[stats.polled + stats.expired === 0 ? 'debug' : 'info']('poll batch', {
    ...stats,
    messages: event.Records.length,
    failedMessages: batchItemFailures.length,
  });
  publishRun(metrics, logger, opened.healths, stats);
  return { batchItemFailures };
};
