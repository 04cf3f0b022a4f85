/**
 * The two engines' operation stores, for contract tests that run the same
 * cases against both: the embedded engine on a real SQLite file, and the
 * DynamoDB store on the run's moto (a table of its own).
 *
 * `changes()` reads what each engine hands to its consumers: the SQLite
 * outbox, or the DynamoDB table's stream.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { inject } from 'vitest';
import type { OperationRecord } from '../../lambda/core/reducer.ts';
import { createDocumentClient, createDynamoDbClient } from '../../lambda/store/dynamodb.ts';
import { DynamoDbOperationStore } from '../../lambda/store/dynamodb-operation-store.ts';
import type {
  DeliveryReceipts,
  OperationQueries,
  OperationStore,
  PollRequests,
  PollSchedule,
  UnprocessableLog,
} from '../../lambda/store/operation-store.ts';
import { createTableInput } from '../../lambda/store/table.ts';
import { openDataFolder } from '../../local/engine/data-folder.ts';
import { SqliteOperationStore } from '../../local/engine/operation-store.ts';
import { ensureTable } from './aws/tables.ts';
import { readStream } from './stream-records.ts';

export type FullStore = OperationStore & OperationQueries & PollSchedule & PollRequests & DeliveryReceipts & UnprocessableLog;

export interface StoreUnderTest {
  store: FullStore;
  /** Every applied write the engine's change feed holds, in feed order. */
  changes(): Promise<Array<Pick<OperationRecord, 'name' | 'version' | 'stateChanged'>>>;
  close(): Promise<void>;
}

export interface Engine {
  label: string;
  /** A store with nothing in it (`id` keeps engines' tables and files apart). */
  open(id: string): Promise<StoreUnderTest>;
}

export const sqliteEngine: Engine = {
  label: 'SQLite',
  open: async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ratchet-store-'));
    const data = openDataFolder(dir);
    return {
      store: new SqliteOperationStore(data.db),
      changes: async () =>
        data.db
          .all<{ new_record: string }>('SELECT new_record FROM changes ORDER BY seq')
          .map((row) => JSON.parse(row.new_record) as OperationRecord),
      close: async () => {
        data.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};

export const dynamoDbEngine: Engine = {
  label: 'DynamoDB',
  open: async (id) => {
    const endpoint = inject('dynamodbEndpoint');
    const tableName = `${inject('tableName')}-${id}-${Date.now()}`;
    const client = createDynamoDbClient({ endpoint });
    await ensureTable(client, createTableInput(tableName));
    return {
      store: new DynamoDbOperationStore(createDocumentClient(client), tableName),
      changes: async () =>
        (await readStream(client, endpoint, tableName))
          .map((record) => unmarshall(record.dynamodb?.NewImage as never) as OperationRecord & { writeKind?: string })
          .filter((image) => image.writeKind !== 'poll-schedule' && typeof image.version === 'number'),
      close: async () => client.destroy(),
    };
  },
};

export const ENGINES: readonly Engine[] = [sqliteEngine, dynamoDbEngine];
