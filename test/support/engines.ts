/**
 * The engines, for the conformance suite (test/integration/conformance.test.ts)
 * and the tests that run the same cases against each: the embedded engine on a
 * real SQLite file, and DynamoDB on the run's moto (tables of their own). A new
 * engine is one more entry in ENGINES.
 *
 * `changes()` reads what each engine hands to its consumers: the SQLite
 * outbox, or the DynamoDB table's stream.
 *
 * DynamoDB's list of operations is a read model the history writer keeps
 * from the table's stream (engines/dynamodb/tables.ts), eventually: here its
 * handler is run over the stream's new records before each `list`, as the
 * stack's mapping would have run it by then.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { inject } from 'vitest';
import type { DeadLetters } from '../../app/effects/dead-letters.ts';
import type { EffectLedger } from '../../app/effects/ledger.ts';
import type { HistoryLog } from '../../app/history.ts';
import type {
  DeliveryReceipts,
  OperationQueries,
  OperationStore,
  OverdueWatch,
  PollRequests,
  PollSchedule,
  UnprocessableLog,
} from '../../app/ports.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import {
  createTableInput,
  type DynamoDbHistory,
  deadLettersTable,
  deadLetterTableInput,
  historyTable,
  historyTableInput,
  keyedTableInput,
  ledgerTable,
  openDynamoDb,
  operationsTable,
} from '../../engines/dynamodb/index.ts';
import { HISTORY_FILTER } from '../../engines/dynamodb/tables.ts';
import { changesAfter } from '../../engines/postgres/change-log.ts';
import { openPostgresEngine } from '../../engines/postgres/index.ts';
import { openSqliteEngine } from '../../engines/sqlite/index.ts';
import { matchesFilter } from '../../lambda/effects/filter.ts';
import { createHistoryHandler } from '../../lambda/history/stream-handler.ts';
import { toLambdaRecord } from './aws/stream-mapping.ts';
import { ensureTable } from './aws/tables.ts';
import { silentLogger } from './silent-logger.ts';
import { readStream } from './stream-records.ts';

export type FullStore = OperationStore &
  OperationQueries &
  PollSchedule &
  PollRequests &
  OverdueWatch &
  DeliveryReceipts &
  UnprocessableLog;

export interface StoreUnderTest {
  store: FullStore;
  /** The engine's history of applied writes, its effects ledger and its dead letters. */
  history: HistoryLog;
  ledger: EffectLedger;
  deadLetters: DeadLetters;
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
    const { data, store, history, ledger, deadLetters } = openSqliteEngine({
      dataDir: dir,
      historyRetentionDays: 30,
      logger: silentLogger,
    });
    return {
      store,
      history,
      ledger,
      deadLetters,
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
    const dynamodb = openDynamoDb({
      endpoint,
      tables: {
        operations: operationsTable(tableName, `${tableName}-history`),
        history: historyTable(`${tableName}-history`, 30),
        ledger: ledgerTable(`${tableName}-ledger`),
        deadLetters: deadLettersTable(`${tableName}-dead`),
      },
    });
    const { client } = dynamodb;
    await ensureTable(client, createTableInput(tableName));
    for (const input of [
      historyTableInput(`${tableName}-history`),
      keyedTableInput(`${tableName}-ledger`),
      deadLetterTableInput(`${tableName}-dead`),
    ])
      await ensureTable(client, input);
    const store = dynamodb.operations;
    const feed = historyWriter(client, endpoint, tableName, dynamodb.history);
    const list = store.list.bind(store);
    store.list = async (filter) => {
      await feed();
      return list(filter);
    };
    return {
      store,
      history: dynamodb.history,
      ledger: dynamodb.ledger,
      deadLetters: dynamodb.deadLetters,
      changes: async () =>
        (await readStream(client, endpoint, tableName))
          .map((record) => unmarshall(record.dynamodb?.NewImage as never) as OperationRecord & { writeKind?: string })
          .filter((image) => image.writeKind !== 'poll-schedule' && typeof image.version === 'number'),
      close: async () => dynamodb.destroy(),
    };
  },
};

/**
 * The history function's handler run over the stream records its mapping's
 * filter passes and it has not yet had, in stream order, 100 to a batch (the
 * mapping's size); a record it fails fails the feed.
 */
function historyWriter(client: DynamoDBClient, endpoint: string, tableName: string, history: DynamoDbHistory): () => Promise<void> {
  const handler = createHistoryHandler({ history, logger: silentLogger });
  const fed = new Set<string>();
  return async () => {
    const records = (await readStream(client, endpoint, tableName)).filter(
      (record) => !fed.has(record.dynamodb?.SequenceNumber as string) && matchesFilter(HISTORY_FILTER, record),
    );
    for (let i = 0; i < records.length; i += 100) {
      const batch = records.slice(i, i + 100);
      const { batchItemFailures } = await handler({ Records: batch.map((record) => toLambdaRecord(record, tableName)) });
      if (batchItemFailures.length > 0) throw new Error(`the history writer failed ${batchItemFailures.length} records`);
      for (const record of batch) fed.add(record.dynamodb?.SequenceNumber as string);
    }
  };
}

/** A schema of its own on the run's PostgreSQL server, dropped at close. */
export const postgresEngine: Engine = {
  label: 'PostgreSQL',
  open: async (id) => {
    const schema = `t_${id.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${Date.now().toString(36)}`;
    const engine = await openPostgresEngine({ url: inject('postgresUrl'), schema, historyRetentionDays: 30, effects: true });
    return {
      store: engine.store,
      history: engine.history,
      ledger: engine.ledger,
      deadLetters: engine.deadLetters,
      changes: async () => {
        const all: OperationRecord[] = [];
        let cursor: string | undefined;
        for (;;) {
          const page = await changesAfter(engine.db, cursor, 1000);
          if (page.changes.length === 0) return all;
          all.push(...page.changes.map((change) => JSON.parse(change.newRecord) as OperationRecord));
          cursor = page.cursor;
        }
      },
      close: async () => {
        await engine.db.run('DROP SCHEMA {s} CASCADE');
        await engine.close();
      },
    };
  },
};

export const ENGINES: readonly Engine[] = [sqliteEngine, dynamoDbEngine, postgresEngine];
