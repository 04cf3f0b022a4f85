/**
 * EventBridge-scheduled entry point: reconcile's dispatcher, one run at a
 * time. Opened as every home opens reconcile (app/reconcile/open.ts), it keeps
 * the chores that run once (the overdue sweep, the hourly webhook health check
 * and discovery) and hands the due jobs to the poll queue instead of polling
 * them (lambda/reconcile/fanout.ts); the poll workers
 * (lambda/handlers/poll-worker.ts) poll them. The API function wakes it for a
 * job that must be polled at once. Its counts are logged and published as metrics.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { loadConfig } from '../../app/config.ts';
import { createLogger } from '../../app/logger.ts';
import { openReconciler, type Reconciler } from '../../app/reconcile/open.ts';
import type { ReconcileStats } from '../../app/reconcile/reconcile.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { dispatchDue } from '../reconcile/fanout.ts';
import { type KeyHealths, keyHealthsOf, publishRun, settingsWithSecrets } from '../reconcile/settings.ts';
import { createMetrics, emfTelemetry } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();
const metrics = createMetrics();
const telemetry = emfTelemetry(metrics);
const { operations: store } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: { operations: operationsTable(config.TABLE_NAME, undefined, config.OPEN_INDEX_NAME) },
});
const sqs = new SQSClient({});
/** Stop handing out jobs this long before the Lambda's own timeout. */
const SAFETY_MS = 15_000;

interface Opened {
  /** The credentials it was opened with: a rotated secret makes a new reconciler. */
  key: string;
  reconciler: Reconciler | undefined;
  healths: KeyHealths;
}
let opened: Opened | undefined;

export const handler = async (_event: unknown, context: Context): Promise<ReconcileStats | { skipped: string }> => {
  let found: Awaited<ReturnType<typeof settingsWithSecrets>>;
  try {
    found = await settingsWithSecrets(config, logger);
  } catch (error) {
    logger.error('reconcile skipped: the Agent Platform credentials cannot be read', { detail: (error as Error).message });
    return { skipped: 'invalid-credentials' };
  }
  if (opened?.key !== found.key) {
    const options = await found.settings.poller();
    const healths = keyHealthsOf(options?.gemini?.keys?.map((labelled) => labelled.label) ?? []);
    const queueUrl = config.POLL_QUEUE_URL;
    if (!queueUrl) throw new Error('POLL_QUEUE_URL is not set: the dispatcher has nowhere to send the due jobs');
    const handOff = (now: string, deadlineMs: number) =>
      dispatchDue({ store, sqs, queueUrl, room: config.POLL_QUEUE_ROOM, logger }, now, deadlineMs);
    const reconciler = await openReconciler(
      found.settings,
      { store },
      { logger, credentials: healths.gemini, keyHealth: healths.keyHealth, telemetry, handOff },
    );
    opened = { key: found.key, reconciler, healths };
  }
  if (!opened.reconciler) return { skipped: 'no-api-key' };
  const stats = await opened.reconciler(Math.max(1_000, context.getRemainingTimeInMillis() - SAFETY_MS));
  publishRun(metrics, logger, opened.healths, stats);
  return stats;
};
