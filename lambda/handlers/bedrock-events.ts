/**
 * EventBridge entry point: each Bedrock "Batch Inference Job State Change"
 * event the rule on the default bus sends (lib/ratchet.ts) into the ingest
 * (lambda/bedrock-events.ts). A function of its own rather than a path of the
 * API's: it needs the table and nothing else (no secrets, no Hono, no invoke
 * grant), its concurrency is not the open webhook routes', and a failed write
 * is retried by Lambda's asynchronous invocation, not by an HTTP sender.
 */
import { loadConfig } from '../../app/config.ts';
import { createLogger } from '../../app/logger.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { type BedrockJobEvent, ingestBedrockEvent } from '../bedrock-events.ts';
import { createMetrics, emfTelemetry, publishedAfter } from '../telemetry.ts';

const config = loadConfig();
const logger = createLogger();
const { operations: store } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: { operations: operationsTable(config.TABLE_NAME) },
});
const telemetry = emfTelemetry(createMetrics(), { batched: true });

export const handler = publishedAfter(
  (event: BedrockJobEvent) => ingestBedrockEvent(event, { store, unprocessable: store, logger, telemetry }),
  telemetry,
);
