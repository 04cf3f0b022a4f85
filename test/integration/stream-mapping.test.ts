/**
 * The local stream mapping against moto's real stream: Lambda's
 * retry-from-the-failed-record semantics, bounded retries, the dead-letter
 * store, and moving on after it.
 */
import { DescribeTableCommand } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { type EffectSink, SinkError } from '../../app/effects/sinks.ts';
import type { Transition } from '../../app/effects/transition.ts';
import { ingest } from '../../app/ingest.ts';
import type { OperationEvent } from '../../core/reducer.ts';
import { keyedTableInput, openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { transitionFromRecord } from '../../lambda/effects/stream-records.ts';
import { LocalStreamMapping, type StreamHandler } from '../support/aws/stream-mapping.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { eventually } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';
import { readStream } from '../support/stream-records.ts';

const endpoint = inject('dynamodbEndpoint');
const tableName = inject('tableName');
const { client, documents, operations: store } = openDynamoDb({ endpoint, tables: { operations: operationsTable(tableName) } });
afterAll(() => client.destroy());

class FlakySink implements EffectSink {
  readonly name = 'flaky';
  readonly delivered: string[] = [];
  constructor(private readonly refuse: (t: Transition) => boolean) {}
  async deliver(t: Transition) {
    if (this.refuse(t)) throw new SinkError(`refused ${t.name}`);
    this.delivered.push(`${t.name}#${t.version}`);
  }
}

const running = (name: string): OperationEvent => ({
  name,
  kind: 'batch',
  state: 'RUNNING',
  providerState: 'JOB_STATE_RUNNING',
  source: 'poll',
});

describe('LocalStreamMapping', () => {
  it('retries from the failed record, dead-letters it after the last retry, and goes on', async () => {
    const run = Date.now();
    const poison = `batches/poison-${run}`;
    const later = `batches/later-${run}`;
    const stateTable = `${tableName}-mapping-${run}`;
    await ensureTable(client, keyedTableInput(stateTable));
    const sink = new FlakySink((t) => t.name === poison);
    // A handler with Lambda's contract: the first record the sink refuses, and all after it, are reported failed.
    const effects: StreamHandler = async (event) => {
      for (const [i, record] of event.Records.entries()) {
        try {
          await sink.deliver(transitionFromRecord(record));
        } catch {
          return { batchItemFailures: event.Records.slice(i).map((r) => ({ itemIdentifier: r.dynamodb?.SequenceNumber as string })) };
        }
      }
      return { batchItemFailures: [] };
    };
    const batchesWithPoison: string[][] = [];
    const handler: StreamHandler = async (event) => {
      const names = event.Records.map((r) => r.dynamodb?.NewImage?.name?.S as string);
      if (names.includes(poison)) batchesWithPoison.push(names);
      return effects(event);
    };
    const mapping = new LocalStreamMapping({
      client,
      documents,
      endpoint,
      tableName,
      stateTableName: stateTable,
      handler,
      logger: silentLogger,
      batchSize: 10,
      retryAttempts: 2,
      retryBaseMs: 10,
      pollMs: 50,
    });
    mapping.start();
    try {
      await ingest(running(poison), { store });
      const deadLetter = async () =>
        (
          await documents.send(
            new GetCommand({ TableName: stateTable, Key: { key: `dead-letter#${await streamArn()}#${await sequenceOf(poison)}` } }),
          )
        ).Item;
      await eventually(async () => (await deadLetter()) !== undefined, 30_000, 'the dead letter');

      // One first attempt (other tests' records may precede it in the batch) and two retries, each starting at the failed record.
      expect(batchesWithPoison).toHaveLength(3);
      for (const batch of batchesWithPoison.slice(1)) expect(batch[0]).toBe(poison);
      const letter = await deadLetter();
      expect(letter).toMatchObject({ attempts: 3 });
      expect(letter?.records[0]).toMatchObject({ eventName: 'INSERT', dynamodb: { NewImage: { name: { S: poison } } } });
      expect(sink.delivered.filter((d) => d.startsWith(poison))).toEqual([]);

      await ingest(running(later), { store });
      await eventually(() => sink.delivered.includes(`${later}#1`), 30_000, 'the record after the dead letter');
    } finally {
      await mapping.stop();
    }
  });
});

async function streamArn(): Promise<string> {
  const { Table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
  return Table?.LatestStreamArn as string;
}

async function sequenceOf(name: string): Promise<string | undefined> {
  const records = await readStream(client, endpoint, tableName);
  return records.find((r) => r.dynamodb?.Keys?.name?.S === name)?.dynamodb?.SequenceNumber;
}
