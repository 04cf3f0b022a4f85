/**
 * History from the table's real stream (moto): every applied write
 * in version order, idempotent per name#version when stream records come
 * again, shuffled or duplicated; served by GET /operations/{name}/history.
 * Beside the entries, the operation's latest item (the list's read model):
 * the newest version whatever order the records came in, never an entry.
 */

import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createApp } from '../../app/http/app.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import {
  backfillList,
  createTableInput,
  historyTable,
  historyTableInput,
  openDynamoDb,
  operationsTable,
} from '../../engines/dynamodb/index.ts';
import { HISTORY_FILTER, listShardOf } from '../../engines/dynamodb/tables.ts';
import { matchesFilter } from '../../lambda/effects/filter.ts';
import { createHistoryHandler } from '../../lambda/history/stream-handler.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { shuffle } from '../support/shuffle.ts';
import { silentLogger } from '../support/silent-logger.ts';
import { readStream } from '../support/stream-records.ts';

const endpoint = inject('dynamodbEndpoint');
const tableName = `${inject('tableName')}-history-source`;
const {
  client,
  documents,
  operations: store,
  history,
} = openDynamoDb({
  endpoint,
  tables: { operations: operationsTable(tableName, `${tableName}-history`), history: historyTable(`${tableName}-history`, 30) },
});
const secret = newSecret();
const app = createApp({
  store,
  queries: store,
  history,
  verifier: new WebhookSignatureVerifier(async () => [secret]),
  logger: silentLogger,
});

async function deliver(type: string, id: string, time: string, webhookId?: string) {
  const { body, headers } = signedDelivery(secret, envelope(type, { id }, time), webhookId ? { id: webhookId } : {});
  return (await app.request('/webhooks/gemini', { method: 'POST', body, headers })).json();
}

beforeAll(async () => {
  await ensureTable(client, createTableInput(tableName));
  await ensureTable(client, historyTableInput(`${tableName}-history`));
  const track = await app.request('/operations', {
    method: 'POST',
    body: JSON.stringify({ name: 'interactions/h1' }),
    headers: { 'content-type': 'application/json' },
  });
  expect(track.status).toBe(201);
  await deliver('interaction.requires_action', 'interactions/h1', '2026-11-30T10:00:01Z', 'msg_1');
  await deliver('interaction.requires_action', 'interactions/h1', '2026-11-30T10:00:01Z', 'msg_1'); // duplicate: no write
  await deliver('interaction.requires_action', 'interactions/h1', '2026-11-30T10:00:02Z', 'msg_2'); // refresh
  await deliver('interaction.completed', 'interactions/h1', '2026-11-30T10:00:03Z', 'msg_3');
  await deliver('interaction.requires_action', 'interactions/h1', '2026-11-30T10:00:04Z', 'msg_4'); // regress: no write
});
afterAll(() => client.destroy());

describe('history', () => {
  it('keeps every applied write once, in version order, however often and in whatever order the stream records come', async () => {
    const records = (await readStream(client, endpoint, tableName)).filter((r) => matchesFilter(HISTORY_FILTER, r));
    expect(records).toHaveLength(4);
    const handler = createHistoryHandler({ history, logger: silentLogger });
    const shuffled = shuffle(
      [...records, ...records, records[0], records[2]].filter((r) => r !== undefined),
      7,
    );
    for (const record of shuffled) expect(await handler({ Records: [record] } as DynamoDBStreamEvent)).toEqual({ batchItemFailures: [] });

    const response = await app.request('/operations/interactions/h1/history');
    expect(response.status).toBe(200);
    const body = (await response.json()) as { name: string; history: Array<Record<string, unknown>> };
    expect(body.name).toBe('interactions/h1');
    expect(body.history.map((e) => [e.version, e.previousState, e.state, e.stateChanged, e.source, e.eventId])).toEqual([
      [1, null, null, false, 'track', null],
      [2, null, 'REQUIRES_ACTION', true, 'webhook', 'msg_1'],
      [3, 'REQUIRES_ACTION', 'REQUIRES_ACTION', false, 'webhook', 'msg_2'],
      [4, 'REQUIRES_ACTION', 'SUCCEEDED', true, 'webhook', 'msg_3'],
    ]);
    expect(body.history[3]).toMatchObject({ updateTime: '2026-11-30T10:00:03.000000000Z', recordedAt: expect.any(String) });

    // The latest item holds version 4, though versions 1 and 3 came again after it; no TTL (an operation never expires).
    const { Item } = await documents.send(
      new GetCommand({ TableName: `${tableName}-history`, Key: { name: 'interactions/h1', version: 0 } }),
    );
    expect(Item).toEqual({
      name: 'interactions/h1',
      version: 0,
      latestVersion: 4,
      listShard: listShardOf('interactions/h1'),
      listSort: `${body.history[3]?.recordedAt}#interactions/h1`,
      state: 'SUCCEEDED',
      kind: 'interaction',
    });
    const listed = (await (await app.request('/operations?kind=interaction')).json()) as {
      operations: Array<{ name: string; version: number }>;
    };
    expect(listed.operations.map((o) => [o.name, o.version])).toEqual([['interactions/h1', 4]]);
  });

  it('answers 404 for an unknown operation, 400 for a bad name, and keeps an operation called "history" a record', async () => {
    expect((await app.request('/operations/batches/nobody/history')).status).toBe(404);
    expect((await app.request('/operations/files/x/history')).status).toBe(400);
    await deliver('batch.succeeded', 'batches/history', '2026-11-30T10:00:00Z');
    expect(await (await app.request('/operations/batches/history')).json()).toMatchObject({ name: 'batches/history', state: 'SUCCEEDED' });
    expect(await (await app.request('/operations/batches/history/history')).json()).toMatchObject({ name: 'batches/history', history: [] });
  });

  it('skips a record that is no operation write, and fails the rest of the batch in order when the store fails', async () => {
    const failing = historyTable('no-such-history-table')(documents);
    const [record] = (await readStream(client, endpoint, tableName)).filter((r) => matchesFilter(HISTORY_FILTER, r));
    const odd = { eventID: 'x', dynamodb: { SequenceNumber: '1', NewImage: { name: { S: 'n' } } } };
    const handler = createHistoryHandler({ history: failing, logger: silentLogger });
    const result = await handler({ Records: [odd, record, record] } as DynamoDBStreamEvent);
    expect(result.batchItemFailures).toHaveLength(2);
  });

  it('backfill-list puts every operation in the list that no stream record has put there, and changes nothing run again', async () => {
    const names = async () =>
      ((await (await app.request('/operations')).json()) as { operations: Array<{ name: string }> }).operations.map((o) => o.name);
    expect(await names()).not.toContain('batches/history'); // written above, its stream record never handed to the history writer
    expect(await backfillList(documents, tableName, history)).toBe(2);
    expect(await names()).toEqual(['batches/history', 'interactions/h1']);
    const latest = () =>
      documents.send(new GetCommand({ TableName: `${tableName}-history`, Key: { name: 'interactions/h1', version: 0 } }));
    const before = (await latest()).Item;
    expect(await backfillList(documents, tableName, history)).toBe(2);
    expect((await latest()).Item).toEqual(before);
  });

  it('an operation written before the list moved leaves recent-by-recorded on its next write, compiled or not', async () => {
    const item = async () => (await documents.send(new GetCommand({ TableName: tableName, Key: { name: 'batches/legacy' } }))).Item;
    await deliver('batch.succeeded', 'batches/legacy', '2026-11-30T10:00:00Z');
    const legacy = async () =>
      documents.send(
        new UpdateCommand({
          TableName: tableName,
          Key: { name: 'batches/legacy' },
          UpdateExpression: 'SET listPartition = :p',
          ExpressionAttributeValues: { ':p': 'operations' },
        }),
      );
    await legacy();
    await deliver('batch.succeeded', 'batches/legacy', '2026-11-30T10:00:05Z'); // a later time: a refresh, compiled
    expect(await item()).not.toHaveProperty('listPartition');
    await legacy();
    const record = await store.get('batches/legacy');
    expect(record && (await store.write({ ...record, version: record.version + 1 }, record.version)).ok).toBe(true);
    expect(await item()).not.toHaveProperty('listPartition');
  });
});
