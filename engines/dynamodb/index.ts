/**
 * The DynamoDB engine as lambda/, the CLI and the bench reach it (they import
 * nothing else of it; the stack reads tables.ts): `openDynamoDb`, the one
 * place a DynamoDB client is made, opening the tables a function is given as
 * the application's ports, and the stream records' decoding.
 *
 * Each table is named with its opener (`operationsTable(name)`, …), not by a
 * bare name: a function's bundle then holds the code of the ports it opens and
 * no other (the history function's, the 500-line operation store and its
 * compiled writes would be a tenth more to load at every cold start).
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { createDocumentClient, createDynamoDbClient, type DynamoDbSettings } from './client.ts';
import { DynamoDbDeadLetters } from './dead-letters.ts';
import { DynamoDbHistory, type Listing } from './history.ts';

export { listingOf } from './history.ts';
/** `ratchet-aws backfill-list`. */
export { backfillList } from './list-backfill.ts';

import { DynamoDbEffectLedger } from './ledger.ts';
import { DynamoDbOperationStore } from './operation-store.ts';

export { createDynamoDbClient, type DynamoDbSettings } from './client.ts';
/** The write the store sends for an event, for the bench's capacity figure (bench/aws-path.ts). */
export { compileWrite } from './compiled-write.ts';
export type { DueJob, DuePage } from './operation-store.ts';
export { newImageOf } from './stream-images.ts';
export { createTableInput, deadLetterTableInput, historyTableInput, keyedTableInput } from './table-inputs.ts';
export type { DynamoDbDeadLetters, DynamoDbEffectLedger, DynamoDbHistory, DynamoDbOperationStore, Listing };

/** A table a function is given, and how it is opened as a port over the one client. */
export type TableOpener<Port> = (documents: DynamoDBDocumentClient) => Port;

/**
 * The operations table: the store, its queries, the poll schedule, the
 * receipts and the unprocessable log; `listTable`, the history table, where
 * the list of operations is read (only `list` needs it); `openIndex`, the
 * schedule index reconcile reads due jobs from (tables.ts OPEN_INDEX unless a
 * stack is upgrading).
 */
export const operationsTable =
  (name: string, listTable?: string, openIndex?: string): TableOpener<DynamoDbOperationStore> =>
  (documents) =>
    new DynamoDbOperationStore(documents, name, listTable, openIndex);

/** The history table, its entries kept `retentionDays` (the table's TTL deletes them after). */
export const historyTable =
  (name: string, retentionDays?: number): TableOpener<DynamoDbHistory> =>
  (documents) =>
    new DynamoDbHistory(documents, name, retentionDays);

/** The effects ledger: which sink took which change. */
export const ledgerTable =
  (name: string): TableOpener<DynamoDbEffectLedger> =>
  (documents) =>
    new DynamoDbEffectLedger(documents, name);

/** The effects' dead letters. */
export const deadLettersTable =
  (name: string): TableOpener<DynamoDbDeadLetters> =>
  (documents) =>
    new DynamoDbDeadLetters(documents, name);

type Openers = Record<string, TableOpener<unknown> | undefined>;

/** A port per table given (undefined where the table may be absent). */
export type OpenedTables<T extends Openers> = {
  readonly [K in keyof T]: T[K] extends TableOpener<infer Port>
    ? Port
    : Exclude<T[K], undefined> extends TableOpener<infer Port>
      ? Port | undefined
      : never;
};

export type DynamoDb<T extends Openers> = OpenedTables<T> & {
  /** The low-level client (tables are created with it on moto). */
  readonly client: DynamoDBClient;
  /** The document client every port shares. */
  readonly documents: DynamoDBDocumentClient;
  /** Closes the client's sockets (a long-lived process's end; a Lambda never calls it). */
  destroy(): void;
};

/**
 * One client (module scope in a Lambda: made once per cold start, reused by
 * every warm invocation) and the ports on the tables given.
 */
export function openDynamoDb<T extends Openers>(options: DynamoDbSettings & { tables: T }): DynamoDb<T> {
  const { tables, ...settings } = options;
  const client = createDynamoDbClient(settings);
  const documents = createDocumentClient(client);
  const ports = Object.fromEntries(Object.entries(tables).map(([role, open]) => [role, open?.(documents)]));
  return { ...(ports as OpenedTables<T>), client, documents, destroy: () => client.destroy() };
}
