import type { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { OperationRecord } from '../../lambda/core/reducer.ts';
import type { DeadLetters } from '../../lambda/effects/dead-letters.ts';
import { matchesFilter, STATE_CHANGE_FILTER } from '../../lambda/effects/filter.ts';
import type { EffectLedger } from '../../lambda/effects/ledger.ts';
import { createEffectsHandler } from '../../lambda/effects/process.ts';
import { type EffectSink, EventBridgeSink, SinkError, WebhookSink } from '../../lambda/effects/sinks.ts';
import { type Transition, transitionFromRecord } from '../../lambda/effects/transition.ts';
import { newSecret } from '../support/deliveries.ts';
import { Receiver } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

function operation(version: number, state: OperationRecord['state'], stateChanged = true, name = 'batches/1'): OperationRecord {
  return {
    name,
    kind: 'batch',
    state,
    providerState: `JOB_STATE_${state}`,
    updateTime: `2026-11-30T10:00:0${version}.000000000Z`,
    version,
    previousState: null,
    stateChanged,
    source: 'poll',
    eventId: null,
    result: null,
    createdAt: '2026-11-30T10:00:00.000000000Z',
    recordedAt: `2026-11-30T10:00:0${version}.000000000Z`,
  };
}

function streamRecord(image: OperationRecord, eventName: 'INSERT' | 'MODIFY' = 'MODIFY', sequence = image.version): DynamoDBRecord {
  return {
    eventName,
    eventID: `e${sequence}`,
    dynamodb: {
      SequenceNumber: String(1000 + sequence),
      // As the store writes it: the kind of write beside the record.
      NewImage: marshall(
        { ...image, writeKind: image.stateChanged ? 'state-change' : 'refresh' },
        { removeUndefinedValues: true },
      ) as never,
    },
  };
}

class MemoryLedger implements EffectLedger {
  readonly done = new Set<string>();
  async isDelivered(sink: string, key: string) {
    return this.done.has(`${sink}#${key}`);
  }
  async markDelivered(sink: string, key: string) {
    this.done.add(`${sink}#${key}`);
  }
}

class MemoryDeadLetters implements DeadLetters {
  readonly parked: Array<{ record: DynamoDBRecord; reason: string }> = [];
  async parkUndecodable(record: DynamoDBRecord, reason: string) {
    this.parked.push({ record, reason });
  }
}

class RecordingSink implements EffectSink {
  readonly name = 'recording';
  readonly delivered: string[] = [];
  failOn = new Set<string>();
  async deliver(t: Transition) {
    const key = `${t.name}#${t.version}`;
    if (this.failOn.has(key)) throw new SinkError(`refused ${key}`);
    this.delivered.push(key);
  }
}

describe('state change filter', () => {
  it('passes inserts and modifies that changed state, and nothing else', () => {
    expect(matchesFilter(STATE_CHANGE_FILTER, streamRecord(operation(1, 'RUNNING'), 'INSERT'))).toBe(true);
    expect(matchesFilter(STATE_CHANGE_FILTER, streamRecord(operation(2, 'SUCCEEDED')))).toBe(true);
    expect(matchesFilter(STATE_CHANGE_FILTER, streamRecord(operation(3, 'SUCCEEDED', false)))).toBe(false);
    expect(matchesFilter(STATE_CHANGE_FILTER, { ...streamRecord(operation(2, 'SUCCEEDED')), eventName: 'REMOVE' })).toBe(false);
    expect(matchesFilter(STATE_CHANGE_FILTER, { eventName: 'MODIFY', dynamodb: {} })).toBe(false);
  });
});

describe('transitionFromRecord', () => {
  it('reads the transition from the new image', () => {
    const image = { ...operation(2, 'SUCCEEDED'), previousState: 'RUNNING' as const, result: { outputUri: 'files/o' } };
    expect(transitionFromRecord(streamRecord(image))).toEqual({
      name: 'batches/1',
      kind: 'batch',
      state: 'SUCCEEDED',
      previousState: 'RUNNING',
      version: 2,
      updateTime: '2026-11-30T10:00:02.000000000Z',
      providerState: 'JOB_STATE_SUCCEEDED',
      result: { outputUri: 'files/o' },
      recordedAt: '2026-11-30T10:00:02.000000000Z',
    });
  });
});

describe('effects handler', () => {
  let ledger: MemoryLedger;
  let sink: RecordingSink;
  let deadLetters: MemoryDeadLetters;
  beforeEach(() => {
    ledger = new MemoryLedger();
    sink = new RecordingSink();
    deadLetters = new MemoryDeadLetters();
  });
  const handle = (records: DynamoDBRecord[]) =>
    createEffectsHandler({ sinks: [sink], ledger, deadLetters, logger: silentLogger })({ Records: records });

  it('dead-letters an undecodable record at once, raw, and delivers the records behind it', async () => {
    const broken = streamRecord(operation(2, 'FAILED'), 'MODIFY');
    // An attribute with no type: what the Streams client made of an empty map before the local mapping repaired it.
    (broken.dynamodb?.NewImage as Record<string, unknown>).result = { M: { error: {} } };
    const records = [streamRecord(operation(1, 'RUNNING')), broken, streamRecord(operation(3, 'SUCCEEDED'), 'MODIFY', 3)];
    expect(await handle(records)).toEqual({ batchItemFailures: [] });
    expect(sink.delivered).toEqual(['batches/1#1', 'batches/1#3']);
    expect(deadLetters.parked).toEqual([{ record: broken, reason: expect.stringMatching(/e2 cannot be decoded: No value defined/) }]);
  });

  it('delivers in record order and skips records the filter drops', async () => {
    const records = [
      streamRecord(operation(1, 'PENDING'), 'INSERT'),
      streamRecord(operation(2, 'PENDING', false)),
      streamRecord(operation(3, 'RUNNING')),
    ];
    expect(await handle(records)).toEqual({ batchItemFailures: [] });
    expect(sink.delivered).toEqual(['batches/1#1', 'batches/1#3']);
  });

  it('stops at the first failure: that record and all later ones are reported, nothing later is delivered', async () => {
    sink.failOn.add('batches/1#2');
    const records = [1, 2, 3].map((v) => streamRecord(operation(v, v === 3 ? 'SUCCEEDED' : 'RUNNING')));
    records.push(streamRecord(operation(1, 'RUNNING', true, 'batches/other'), 'INSERT', 4));
    expect(await handle(records)).toEqual({
      batchItemFailures: [{ itemIdentifier: '1002' }, { itemIdentifier: '1003' }, { itemIdentifier: '1004' }],
    });
    expect(sink.delivered).toEqual(['batches/1#1']);
  });

  it('on a replay, delivers only what the ledger has not seen', async () => {
    sink.failOn.add('batches/1#2');
    const records = [1, 2, 3].map((v) => streamRecord(operation(v, 'RUNNING')));
    await handle(records);
    sink.failOn.clear();
    expect(await handle(records)).toEqual({ batchItemFailures: [] });
    expect(sink.delivered).toEqual(['batches/1#1', 'batches/1#2', 'batches/1#3']);
  });
});

describe('WebhookSink', () => {
  const secret = newSecret();
  let receiver: Receiver;
  beforeEach(async () => {
    receiver = await new Receiver(secret).start();
  });
  afterEach(() => receiver.stop());
  const transition = transitionFromRecord(streamRecord({ ...operation(2, 'SUCCEEDED'), previousState: 'RUNNING' }));

  it('posts the contract body, signed, with webhook-id <name>#<version>', async () => {
    await new WebhookSink(receiver.url, secret).deliver(transition);
    expect(receiver.accepted).toEqual([
      {
        id: 'batches/1#2',
        signatureValid: true,
        body: {
          type: 'operation.state_changed',
          timestamp: '2026-11-30T10:00:02.000000000Z',
          data: {
            name: 'batches/1',
            kind: 'batch',
            state: 'SUCCEEDED',
            previousState: 'RUNNING',
            version: 2,
            updateTime: '2026-11-30T10:00:02.000000000Z',
            providerState: 'JOB_STATE_SUCCEEDED',
            result: null,
          },
        },
      },
    ]);
  });

  it('retries a non-2xx answer and a timeout with the same id, then gives up with an error', async () => {
    receiver.mode = 'fail';
    const sink = new WebhookSink(receiver.url, secret, { attempts: 2, backoffMs: 1, timeoutMs: 200 });
    await expect(sink.deliver(transition)).rejects.toThrow(/not delivered after 2 attempts: answered 503/);
    receiver.mode = 'hang';
    await expect(sink.deliver(transition)).rejects.toThrow(/no answer within 200 ms/);
    expect(receiver.refused).toBe(4);
    receiver.mode = 'ok';
    await sink.deliver(transition);
    expect(receiver.accepted.map((d) => d.id)).toEqual(['batches/1#2']);
  });
});

describe('EventBridgeSink', () => {
  const transition = transitionFromRecord(streamRecord({ ...operation(2, 'SUCCEEDED'), previousState: 'RUNNING' }));
  // A stand-in for the SDK client (unit test only): records the commands it is sent.
  const clientAnswering = (answer: object) => {
    const sent: PutEventsCommand[] = [];
    const send = async (command: PutEventsCommand) => {
      sent.push(command);
      return answer;
    };
    return { sent, client: { send } as unknown as EventBridgeClient };
  };

  it('puts one Operation State Changed event on the bus, with the idempotency key', async () => {
    const { sent, client } = clientAnswering({ FailedEntryCount: 0, Entries: [{ EventId: 'e' }] });
    await new EventBridgeSink(client, 'ratchet-bus').deliver(transition);
    expect(sent).toHaveLength(1);
    const [entry] = sent[0]?.input.Entries ?? [];
    expect(entry).toMatchObject({ EventBusName: 'ratchet-bus', Source: 'ratchet', DetailType: 'Operation State Changed' });
    expect(JSON.parse(entry?.Detail ?? '{}')).toMatchObject({
      name: 'batches/1',
      state: 'SUCCEEDED',
      previousState: 'RUNNING',
      version: 2,
      idempotencyKey: 'batches/1#2',
    });
  });

  it('fails the delivery when EventBridge rejects the entry', async () => {
    const { client } = clientAnswering({ FailedEntryCount: 1, Entries: [{ ErrorCode: 'ThrottlingException' }] });
    await expect(new EventBridgeSink(client, 'ratchet-bus').deliver(transition)).rejects.toThrow(/PutEvents failed: ThrottlingException/);
  });
});
