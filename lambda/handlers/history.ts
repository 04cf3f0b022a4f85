/**
 * The table's stream (every applied write, filtered by the event source
 * mapping) -> the history table, for `GET /operations/{name}/history`.
 */
import { loadConfig } from '../../app/config.ts';
import { createLogger } from '../../app/logger.ts';
import { historyTable, openDynamoDb } from '../../engines/dynamodb/index.ts';
import { createHistoryHandler } from '../history/stream-handler.ts';

const config = loadConfig();
if (!config.HISTORY_TABLE) throw new Error('HISTORY_TABLE is not set');
const { history } = openDynamoDb({
  endpoint: config.DYNAMODB_ENDPOINT,
  tables: { history: historyTable(config.HISTORY_TABLE, config.HISTORY_RETENTION_DAYS) },
});

export const handler = createHistoryHandler({ history, logger: createLogger() });
