/**
 * The table's stream (every applied write, filtered by the event source
 * mapping) -> the history table, for `GET /operations/{name}/history`.
 */
import { loadConfig } from '../../app/config.ts';
import { createLogger } from '../../app/logger.ts';
import { createDocumentClient, createDynamoDbClient } from '../../engines/dynamodb/client.ts';
import { DynamoDbHistory } from '../../engines/dynamodb/history.ts';
import { createHistoryHandler } from '../history/stream-handler.ts';

const config = loadConfig();
if (!config.HISTORY_TABLE) throw new Error('HISTORY_TABLE is not set');
const history = new DynamoDbHistory(
  createDocumentClient(createDynamoDbClient({ endpoint: config.DYNAMODB_ENDPOINT })),
  config.HISTORY_TABLE,
  config.HISTORY_RETENTION_DAYS,
);

export const handler = createHistoryHandler({ history, logger: createLogger() });
