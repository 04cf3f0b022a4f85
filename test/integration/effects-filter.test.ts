/** The filter criteria against real stream records from moto. */
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { ingest } from '../../app/ingest.ts';
import type { OperationEvent, OperationRecord } from '../../core/reducer.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { matchesFilter, STATE_CHANGE_FILTER } from '../../lambda/effects/filter.ts';
import { readStream } from '../support/stream-records.ts';

const endpoint = inject('dynamodbEndpoint');
const tableName = inject('tableName');
const { client, operations: store } = openDynamoDb({ endpoint, tables: { operations: operationsTable(tableName) } });
afterAll(() => client.destroy());

describe('STATE_CHANGE_FILTER on moto stream records', () => {
  it('passes exactly the writes that changed state', async () => {
    const tracked = `batches/filter-${Date.now()}`;
    const direct = `${tracked}-direct`;
    const event = (name: string, state: OperationEvent['state'], second?: number): OperationEvent => ({
      name,
      kind: 'batch',
      state,
      providerState: state,
      source: 'poll',
      ...(second !== undefined && { updateTime: `2026-11-30T10:00:0${second}.000000000Z` }),
    });
    expect(await store.write(trackedRecord(tracked, 'batch', '2026-11-30T09:00:00.000000000Z'), undefined)).toEqual({ ok: true }); // v1 INSERT, no state
    const outcomes = [];
    for (const e of [
      event(tracked, 'RUNNING', 1), // v2 change
      event(tracked, 'RUNNING', 2), // v3 refresh
      event(tracked, 'PENDING', 3), // discarded: no record
      event(tracked, 'SUCCEEDED', 4), // v4 change
      event(tracked, 'FAILED', 5), // terminal conflict: no record
      event(direct, 'SUCCEEDED', 1), // v1 INSERT change
    ]) {
      outcomes.push((await ingest(e, { store })).outcome);
    }
    expect(outcomes).toEqual(['applied', 'applied', 'discarded', 'applied', 'discarded', 'applied']);

    const records = (await readStream(client, endpoint, tableName)).filter((r) => {
      const name = r.dynamodb?.Keys?.name?.S;
      return name === tracked || name === direct;
    });
    const seen = records.map((r) => {
      const image = unmarshall(r.dynamodb?.NewImage as never) as OperationRecord;
      return `${r.eventName} ${image.name === direct ? 'direct' : 'tracked'} v${image.version} ${matchesFilter(STATE_CHANGE_FILTER, r) ? 'pass' : 'drop'}`;
    });
    expect(seen).toEqual([
      'INSERT tracked v1 drop',
      'MODIFY tracked v2 pass',
      'MODIFY tracked v3 drop',
      'MODIFY tracked v4 pass',
      'INSERT direct v1 pass',
    ]);
  });
});
