/**
 * Every record round-trips: whatever a signed Gemini payload puts into the
 * store comes out of moto's real stream, through the local stream
 * mapping and the effects decoder, as the same transition. And the store's
 * refusals are told from its outages.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { EffectSink } from '../../app/effects/sinks.ts';
import type { Transition } from '../../app/effects/transition.ts';
import { ingest, NotRecordedError } from '../../app/ingest.ts';
import { StoreRejectedError } from '../../app/ports.ts';
import { parseProviderJson, providerNumber } from '../../core/provider-values.ts';
import { type OperationRecord, trackedRecord } from '../../core/reducer.ts';
import {
  createTableInput,
  deadLettersTable,
  deadLetterTableInput,
  keyedTableInput,
  openDynamoDb,
  operationsTable,
} from '../../engines/dynamodb/index.ts';
import { createEffectsHandler } from '../../lambda/effects/process.ts';
import { mapWebhookDelivery } from '../../providers/gemini/webhook.ts';
import { LocalEffectsQueue, queueTableInput } from '../support/aws/effects-queue.ts';
import { LocalStreamMapping } from '../support/aws/stream-mapping.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { eventually } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

const endpoint = inject('dynamodbEndpoint');
const run = Date.now();
const tableName = `${inject('tableName')}-roundtrip-${run}`;
const {
  client,
  documents,
  operations: store,
  deadLetters,
} = openDynamoDb({
  endpoint,
  tables: { operations: operationsTable(tableName), deadLetters: deadLettersTable(`${tableName}-dead-letters`) },
});

const received = new Map<string, Transition>();
const sink: EffectSink = {
  name: 'collect',
  deliver: async (transition) => void received.set(transition.name, transition),
};
const parked = async () => (await deadLetters.listUndecodable()).map((u) => u.reason);
let pipe: LocalStreamMapping;
let queue: LocalEffectsQueue;

// The local effects path as npm start runs it: stream -> pipe -> per-operation queue -> effects handler.
beforeAll(async () => {
  await ensureTable(client, createTableInput(tableName));
  await ensureTable(client, keyedTableInput(`${tableName}-mapping`));
  await ensureTable(client, deadLetterTableInput(`${tableName}-dead-letters`));
  await ensureTable(client, queueTableInput(`${tableName}-queue`));
  queue = new LocalEffectsQueue({ documents, tableName: `${tableName}-queue`, logger: silentLogger });
  await queue.start(
    createEffectsHandler({
      sinks: [sink],
      ledger: { isDelivered: async () => false, markDelivered: async () => {} },
      deadLetters,
      queue,
      retry: { baseMs: 10, maxMs: 10, forSeconds: 1 },
      logger: silentLogger,
    }),
  );
  pipe = new LocalStreamMapping({
    client,
    documents,
    endpoint,
    tableName,
    stateTableName: `${tableName}-mapping`,
    handler: async (event) => {
      await queue.send(event.Records);
      return { batchItemFailures: [] };
    },
    logger: silentLogger,
    batchSize: 10,
    retryAttempts: 0,
    retryBaseMs: 10,
    pollMs: 50,
  });
  pipe.start();
});

afterAll(async () => {
  await pipe.stop();
  await queue.stop();
  client.destroy();
});

// Number literals as Gemini could write them, including those no JavaScript or DynamoDB number holds exactly.
const numberLiteral = fc.oneof(
  fc.constantFrom('1e200', '1e-200', '123456789012345678901234567890123456789', '9007199254740993', '-0', '1.50', '0', '13'),
  fc.integer().map(String),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map(String),
);
const CODE = '__code__';
// An error as a string, as an object with any of its fields (or none: `{}`), plus fields Ratchet does not keep.
const errorField = fc.oneof(
  fc.string(),
  // Nothing Ratchet keeps: stored as an empty map, which the Streams client used to lose.
  fc.constant({ error: {}, extra: {} }),
  fc.constant({ error: { status: 'INTERNAL' }, extra: {} }),
  fc
    .record(
      { code: fc.constant(CODE), message: fc.string(), status: fc.string(), details: fc.array(fc.jsonValue(), { maxLength: 3 }) },
      { requiredKeys: [] },
    )
    .chain((error) =>
      fc.record({
        error: fc.constant(error),
        extra: fc.dictionary(
          fc.string({ minLength: 1 }).filter((key) => !['code', 'message', 'status', '__proto__'].includes(key)),
          fc.jsonValue(),
          { maxKeys: 2 },
        ),
      }),
    ),
);
const payload = fc.record({
  type: fc.constantFrom('batch.failed', 'batch.succeeded', 'interaction.failed', 'interaction.requires_action'),
  error: fc.option(errorField, { nil: undefined }),
  uri: fc.option(fc.string(), { nil: undefined }),
  code: numberLiteral,
  time: fc.integer({ min: 0, max: 59 }),
});

describe('every record round-trips through the stream', () => {
  it('property: signed payload -> ingest -> stream record -> transition never throws and keeps every field', async () => {
    const expected = new Map<string, OperationRecord>();
    let n = 0;
    await fc.assert(
      fc.asyncProperty(payload, async ({ type, error, uri, code, time }) => {
        const id = `rt-${run}-${n++}`;
        const errorValue = error && typeof error === 'object' ? { ...error.extra, ...error.error } : error;
        const data = { id, ...(errorValue !== undefined && { error: errorValue }), ...(uri !== undefined && { output_file_uri: uri }) };
        // The literal goes into the text as Gemini would send it, not through JSON.stringify.
        const text = JSON.stringify({ type, timestamp: `2026-11-30T10:00:${String(time).padStart(2, '0')}Z`, data }).replace(
          `"${CODE}"`,
          code,
        );
        const mapping = mapWebhookDelivery(parseProviderJson(text), `msg-${id}`);
        if (mapping.kind !== 'event') throw new Error('every generated type is known');
        if (typeof errorValue === 'object' && 'code' in errorValue) expect(mapping.event.result?.error?.code).toBe(providerNumber(code));
        const result = await ingest(mapping.event, { store });
        expect(result.outcome).toBe('applied');
        expected.set(mapping.event.name, (await store.get(mapping.event.name)) as OperationRecord);
      }),
      { numRuns: 60 },
    );
    await eventually(
      async () => (await parked()).length > 0 || [...expected.keys()].every((name) => received.has(name)),
      30_000,
      'every transition',
    );
    expect(await parked()).toEqual([]);
    for (const [name, record] of expected) {
      const { createdAt: _c, eventId: _e, source: _s, stateChanged: _sc, ...fields } = record;
      expect(received.get(name)).toEqual(fields);
    }
  });

  it('a code beyond 2^53 arrives as its exact digits, and an error of only a status keeps it', async () => {
    const text = `{"type":"batch.failed","timestamp":"2026-11-30T10:00:00Z","data":{"id":"batches/exact-${run}","error":{"code":9007199254740993,"status":"INTERNAL","details":[{}]}}}`;
    const mapping = mapWebhookDelivery(parseProviderJson(text), 'm');
    if (mapping.kind !== 'event') throw new Error('known type');
    await ingest(mapping.event, { store });
    await eventually(() => received.has(`batches/exact-${run}`), 30_000, 'the transition');
    expect(received.get(`batches/exact-${run}`)?.result).toEqual({ error: { code: '9007199254740993', status: 'INTERNAL' } });
  });
});

describe('the store adapter classifies its errors once', () => {
  const refused = (code: number) => ({
    ...trackedRecord(`batches/refused-${run}-${code}`, 'batch', '2026-11-30T10:00:00.000000000Z'),
    state: 'FAILED' as const,
    result: { error: { code } },
  });

  it('an item DynamoDB refuses (over 400 KB) or a value the client cannot marshal (beyond 2^53) is StoreRejectedError', async () => {
    // Out-of-range numbers (1e-200, 1e200) are refused by DynamoDB too, but not by moto's UpdateItem (moto-quirks.test.ts).
    const huge = { ...refused(1), result: { error: { message: 'x'.repeat(500_000) } } };
    await expect(store.write(huge, undefined)).rejects.toThrow(StoreRejectedError);
    await expect(store.write(refused(2 ** 53 + 2), undefined)).rejects.toThrow(StoreRejectedError);
  });

  it('an unreachable store is an outage: ingest answers NotRecordedError, store-unavailable', async () => {
    const nowhere = openDynamoDb({
      endpoint: 'http://127.0.0.1:9',
      requestTimeoutMs: 500,
      maxAttempts: 1,
      tables: { operations: operationsTable(tableName) },
    });
    const unreachable = nowhere.operations;
    const event = {
      name: `batches/nowhere-${run}`,
      kind: 'batch' as const,
      state: 'FAILED' as const,
      providerState: 'batch.failed',
      source: 'webhook' as const,
    };
    const error = await ingest(event, { store: unreachable }).catch((e) => e);
    expect(error).toBeInstanceOf(NotRecordedError);
    expect(error).not.toBeInstanceOf(StoreRejectedError);
    expect(error.reason).toBe('store-unavailable');
    nowhere.destroy();
  });
});
