/**
 * The one-request write is the reducer: for arbitrary stored records and
 * events, moto's verdict on the compiled ConditionExpression (and the
 * item it writes) equals applyEvent's, for both variants.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import fc from 'fast-check';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { OPERATION_STATES, type OperationState } from '../../core/lifecycle.ts';
import { applyEvent, type OperationEvent, type OperationRecord, trackedRecord } from '../../core/reducer.ts';
import { createDocumentClient, createDynamoDbClient } from '../../engines/dynamodb/client.ts';
import type { Variant } from '../../engines/dynamodb/compiled-write.ts';
import { DynamoDbOperationStore } from '../../engines/dynamodb/operation-store.ts';

const endpoint = inject('dynamodbEndpoint');
const tableName = inject('tableName');
const client = createDynamoDbClient({ endpoint });
const documents = createDocumentClient(client);
const store = new DynamoDbOperationStore(documents, tableName);
afterAll(() => client.destroy());

const NOW = '2026-12-01T00:00:00.000000000Z';
// Small domains, so equal times, equal ids and equal states are frequent.
const time = fc.constantFrom('2026-11-30T10:00:00.000000000Z', '2026-11-30T10:00:00.000000001Z', '2026-11-30T10:00:01.000000000Z');
const state = fc.constantFrom<OperationState>(...OPERATION_STATES);
const eventId = fc.constantFrom('msg_a', 'msg_b', 'poll:1');
const result = fc.option(fc.record({ outputUri: fc.constantFrom('files/a', 'files/b') }), { nil: undefined });
const metadata = fc.option(fc.record({ tenant: fc.constantFrom('acme', 'globex') }), { nil: undefined });

const stored = fc.oneof(
  fc.constant<'none'>('none'),
  fc.constant<'tracked'>('tracked'),
  fc.record({
    state,
    updateTime: fc.option(time, { nil: null }),
    eventId: fc.option(eventId, { nil: null }),
    result: fc.option(fc.record({ outputUri: fc.constantFrom('files/a', 'files/b') }), { nil: null }),
    userMetadata: metadata,
    version: fc.integer({ min: 1, max: 5 }),
    stateChanged: fc.boolean(),
  }),
);
const event = fc.record({
  state,
  updateTime: fc.option(time, { nil: undefined }),
  eventId: fc.option(eventId, { nil: undefined }),
  source: fc.constantFrom<'webhook' | 'poll'>('webhook', 'poll'),
  result,
  userMetadata: metadata,
});

let run = 0;

describe('the compiled conditional write', () => {
  it("moto's verdict and written item equal applyEvent's, for every stored record, event and variant", async () => {
    let applied = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(stored, event, async (before, observed) => {
        for (const variant of ['change', 'refresh'] as Variant[]) {
          const name = `batches/compiled-${++run}`;
          let current: OperationRecord | undefined;
          if (before === 'tracked') current = trackedRecord(name, 'batch', '2026-11-30T09:00:00.000000000Z');
          else if (before !== 'none') {
            current = {
              ...trackedRecord(name, 'batch', '2026-11-30T09:00:00.000000000Z'),
              ...before,
              providerState: `P_${before.state}`,
              previousState: null,
              source: 'webhook',
            };
            if (!before.userMetadata) delete current.userMetadata;
          }
          if (current) expect(await store.write(current, undefined)).toEqual({ ok: true });
          const e: OperationEvent = {
            name,
            kind: 'batch',
            state: observed.state,
            providerState: `E_${observed.state}`,
            source: observed.source,
            ...(observed.updateTime && { updateTime: observed.updateTime }),
            ...(observed.eventId && { eventId: observed.eventId }),
            ...(observed.result && { result: observed.result }),
            ...(observed.userMetadata && { userMetadata: observed.userMetadata }),
          };
          const decision = applyEvent(current, e, NOW);
          const expected = decision.applied && decision.stateChanged === (variant === 'change');
          const outcome = await store.sendCompiled(e, NOW, variant);
          expect({ variant, accepted: outcome.ok }).toEqual({ variant, accepted: expected });
          if (outcome.ok && decision.applied) {
            applied++;
            expect(outcome.record).toEqual(decision.next);
            expect(await store.get(name)).toEqual(decision.next);
          } else {
            refused++;
            // A refusal hands back the stored record, and nothing changed.
            expect(outcome).toMatchObject({ ok: false, legacy: false });
            if (!outcome.ok) expect(outcome.current).toEqual(current);
            expect(await store.get(name)).toEqual(current);
          }
        }
      }),
      { numRuns: 250 },
    );
    expect(applied).toBeGreaterThan(50);
    expect(refused).toBeGreaterThan(50);
  });

  it('refuses an item without the rank it compares (written before it was stored) and says so', async () => {
    const name = `batches/compiled-legacy-${++run}`;
    const legacy = { ...trackedRecord(name, 'batch', NOW), state: 'RUNNING', version: 1 };
    await documents.send(new PutCommand({ TableName: tableName, Item: legacy }));
    const e: OperationEvent = { name, kind: 'batch', state: 'SUCCEEDED', providerState: 'batch.succeeded', source: 'webhook' };
    expect(await store.sendCompiled(e, NOW, 'change')).toMatchObject({ ok: false, legacy: true, current: { state: 'RUNNING' } });
    // apply falls back to read, reduce and compare the version: the event lands, and the item gains its rank.
    expect(await store.apply(e, NOW)).toMatchObject({ ok: true, record: { state: 'SUCCEEDED', version: 2, previousState: 'RUNNING' } });
    expect((await documents.send(new GetCommand({ TableName: tableName, Key: { name } }))).Item).toMatchObject({ rank: 2 });
  });
});
