import type { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBRecord, SQSRecord } from 'aws-lambda';
import { Webhook } from 'standardwebhooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { DeadLetter, DeadLetters, Undecodable } from '../../app/effects/dead-letters.ts';
import type { EffectLedger } from '../../app/effects/ledger.ts';
import { nextAttempt } from '../../app/effects/queue.ts';
import { type EffectSink, SinkError } from '../../app/effects/sinks.ts';
import { effectEvent, type Transition, transitionOf } from '../../app/effects/transition.ts';
import { WebhookSink } from '../../app/effects/webhook-sink.ts';
import { writeKindOf } from '../../core/change.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import { EventBridgeSink } from '../../lambda/effects/eventbridge-sink.ts';
import { matchesFilter, STATE_CHANGE_FILTER } from '../../lambda/effects/filter.ts';
import { createEffectsHandler } from '../../lambda/effects/process.ts';
import type { RetryScheduler } from '../../lambda/effects/sqs-retry-scheduler.ts';
import { transitionFromRecord } from '../../lambda/effects/stream-records.ts';
import { verifyEffect } from '../../sdk/receiver.ts';
import { newSecret } from '../support/deliveries.ts';
import { Receiver } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

function operation(version: number, state: OperationRecord['state'], stateChanged = true, name = 'batches/1'): OperationRecord {
  return {
    name,
    kind: 'batch',
    provider: 'gemini',
    state,
    providerState: `JOB_STATE_${state}`,
    updateTime: `2026-11-30T10:00:0${version}.000000000Z`,
    version,
    // As the reducer writes it: the state before this write (none before the first).
    previousState: version === 1 ? null : 'RUNNING',
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
      NewImage: marshall({ ...image, writeKind: writeKindOf(image) }, { removeUndefinedValues: true }) as never,
    },
  };
}

class MemoryLedger implements EffectLedger {
  readonly done = new Set<string>();
  writes = 0;
  async isDelivered(sink: string, key: string) {
    return this.done.has(`${sink}#${key}`);
  }
  async markDelivered(sink: string, key: string) {
    this.writes += 1;
    this.done.add(`${sink}#${key}`);
  }
}

class MemoryDeadLetters implements DeadLetters {
  /** The versions each `holdsBack` was asked about: what the DynamoDB table's Query would cost. */
  readonly asked: string[] = [];
  readonly undecodable: Array<{ record: unknown; reason: string; sequence: string; name: string | null }> = [];
  readonly letters = new Map<string, DeadLetter>();
  async parkUndecodable({ raw, sequence, name }: Undecodable, reason: string) {
    this.undecodable.push({ record: raw, reason, sequence, name });
  }
  async put(letter: DeadLetter) {
    this.letters.set(letter.idempotencyKey, letter);
  }
  async holdsBack(name: string, version: number) {
    this.asked.push(`${name}#${version}`);
    return [...this.letters.values()].some((l) => l.name === name && l.version < version && l.status === 'dead');
  }
  async remove(name: string, version: number) {
    this.letters.delete(`${name}#${version}`);
  }
  async markRedriving(name: string, version: number) {
    const letter = this.letters.get(`${name}#${version}`);
    if (letter) letter.status = 'redriving';
  }
  async list() {
    return [...this.letters.values()].sort((a, b) => (a.name === b.name ? a.version - b.version : a.name < b.name ? -1 : 1));
  }
  async listUndecodable() {
    return [];
  }
}

class RecordingQueue implements RetryScheduler {
  readonly retries: Array<[string, number]> = [];
  async retryAfter(message: SQSRecord, delayMs: number) {
    this.retries.push([message.messageId, delayMs]);
  }
}

/** A queue message as the SQS event source (or its local emulation) hands it over. */
function message(
  record: DynamoDBRecord,
  options: { receiveCount?: number; firstReceiveAt?: number; redriven?: boolean; body?: string } = {},
): SQSRecord {
  const name = record.dynamodb?.NewImage?.name?.S ?? 'x';
  return {
    messageId: `m-${record.dynamodb?.SequenceNumber ?? record.eventID}`,
    receiptHandle: `r-${record.dynamodb?.SequenceNumber}`,
    body: options.body ?? JSON.stringify(record),
    attributes: {
      ApproximateReceiveCount: String(options.receiveCount ?? 1),
      ApproximateFirstReceiveTimestamp: String(options.firstReceiveAt ?? NOW),
      SentTimestamp: String(NOW),
      SenderId: 's',
      MessageGroupId: `g-${name}`,
    },
    messageAttributes: options.redriven ? { redriven: { stringValue: 'true', dataType: 'String' } } : {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:1:q.fifo',
    awsRegion: 'eu-west-1',
  } as SQSRecord;
}

const NOW = Date.parse('2026-12-01T00:00:00Z');

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

  it('passes the overdue mark (a write of its own that sends operation.overdue)', () => {
    const marked = { ...operation(3, 'RUNNING', false), source: 'overdue' as const, overdue: { at: 't', afterSeconds: 60 } };
    expect(matchesFilter(STATE_CHANGE_FILTER, streamRecord(marked))).toBe(true);
  });
});

describe('transitionFromRecord', () => {
  it('reads the transition from the new image', () => {
    const image = { ...operation(2, 'SUCCEEDED'), previousState: 'RUNNING' as const, result: { outputUri: 'files/o' } };
    expect(transitionFromRecord(streamRecord(image))).toEqual({
      name: 'batches/1',
      kind: 'batch',
      provider: 'gemini',
      state: 'SUCCEEDED',
      previousState: 'RUNNING',
      version: 2,
      updateTime: '2026-11-30T10:00:02.000000000Z',
      providerState: 'JOB_STATE_SUCCEEDED',
      result: { outputUri: 'files/o' },
      recordedAt: '2026-11-30T10:00:02.000000000Z',
    });
  });

  it("carries the job's user_metadata from a dynamic webhook into the effect, for receivers to route by", () => {
    const image = { ...operation(2, 'SUCCEEDED'), userMetadata: { tenant: 'acme', order: 7 } };
    const transition = transitionFromRecord(streamRecord(image));
    expect(transition.userMetadata).toEqual({ tenant: 'acme', order: 7 });
    expect(effectEvent(transition).data.userMetadata).toEqual({ tenant: 'acme', order: 7 });
  });
});

describe('effects handler', () => {
  let ledger: MemoryLedger;
  let sink: RecordingSink;
  let deadLetters: MemoryDeadLetters;
  let queue: RecordingQueue;
  let now: number;
  beforeEach(() => {
    ledger = new MemoryLedger();
    sink = new RecordingSink();
    deadLetters = new MemoryDeadLetters();
    queue = new RecordingQueue();
    now = NOW;
  });
  const retry = { baseMs: 1_000, maxMs: 60_000, forSeconds: 3_600 };
  const handle = (messages: SQSRecord[]) =>
    createEffectsHandler({ sinks: [sink], ledger, deadLetters, queue, retry, logger: silentLogger, clock: () => new Date(now) })({
      Records: messages,
    });
  const ops = (name: string, versions: number[]) =>
    versions.map((v) =>
      message(streamRecord(operation(v, v === 3 ? 'SUCCEEDED' : 'RUNNING', true, name), 'MODIFY', v + (name === 'batches/1' ? 0 : 100))),
    );

  it('delivers each group in order, groups side by side', async () => {
    expect(await handle([...ops('batches/1', [1, 2]), ...ops('batches/2', [1])])).toEqual({ batchItemFailures: [] });
    expect(sink.delivered.filter((k) => k.startsWith('batches/1'))).toEqual(['batches/1#1', 'batches/1#2']);
    expect(sink.delivered).toContain('batches/2#1');
  });

  it('fails the rest of one group after its first failure, retrying it after the base delay and releasing the rest behind it; other groups go on', async () => {
    sink.failOn.add('batches/1#2');
    const messages = [...ops('batches/1', [1, 2, 3]), ...ops('batches/2', [1, 2])];
    expect(await handle(messages)).toEqual({ batchItemFailures: [{ itemIdentifier: 'm-1002' }, { itemIdentifier: 'm-1003' }] });
    expect(sink.delivered).toEqual(['batches/1#1', 'batches/2#1', 'batches/2#2']);
    // The rest of the group goes back at once, behind the failed one: SQS FIFO holds a group while one of its messages is invisible.
    expect(queue.retries).toEqual([
      ['m-1002', 1_000],
      ['m-1003', 0],
    ]);
  });

  it('backs off exponentially up to the maximum, then dead-letters the whole transition when the window is over', async () => {
    sink.failOn.add('batches/1#2');
    const [, second] = ops('batches/1', [1, 2]);
    for (const receiveCount of [2, 3, 10]) await handle([message(streamRecord(operation(2, 'RUNNING')), { receiveCount })]);
    expect(queue.retries.map(([, ms]) => ms)).toEqual([2_000, 4_000, 60_000]);
    now = NOW + 3_600_000;
    expect(await handle([second as SQSRecord])).toEqual({ batchItemFailures: [] });
    expect(deadLetters.letters.get('batches/1#2')).toMatchObject({
      name: 'batches/1',
      version: 2,
      idempotencyKey: 'batches/1#2',
      reason: 'retries-exhausted',
      transition: { state: 'RUNNING', version: 2 },
      body: expect.stringContaining('"type":"operation.state_changed"'),
      lastError: 'refused batches/1#2',
      attempts: 1,
      firstAttemptAt: '2026-12-01T00:00:00.000Z',
      status: 'dead',
    });
  });

  it('parks later versions behind a dead letter, and a re-driven message clears its letter once delivered', async () => {
    sink.failOn.add('batches/1#2');
    now = NOW + 3_600_000;
    await handle(ops('batches/1', [2]));
    await handle(ops('batches/1', [3]));
    expect(sink.delivered).toEqual([]);
    expect([...deadLetters.letters.values()].map((l) => [l.idempotencyKey, l.reason])).toEqual([
      ['batches/1#2', 'retries-exhausted'],
      ['batches/1#3', 'waiting-behind'],
    ]);
    // Re-driven, in order: the letters no longer hold back, and go once delivered.
    sink.failOn.clear();
    for (const letter of await deadLetters.list()) await deadLetters.markRedriving(letter.name, letter.version);
    // As redrive puts them back: the transition itself.
    const redriven = [...deadLetters.letters.values()].map((l) =>
      message({ dynamodb: { NewImage: { name: { S: l.name } }, SequenceNumber: `r${l.version}` } } as DynamoDBRecord, {
        redriven: true,
        body: JSON.stringify({ redriven: l.transition }),
      }),
    );
    expect(await handle(redriven)).toEqual({ batchItemFailures: [] });
    expect(sink.delivered).toEqual(['batches/1#2', 'batches/1#3']);
    expect(deadLetters.letters.size).toBe(0);
  });

  it("looks for no dead letter before an operation's first effect, one ledger write per effect with one sink, and still parks what follows a dead letter", async () => {
    // Version 1: no state before it, never overdue: nothing of its operation can be dead-lettered before it.
    await handle([...ops('batches/1', [1]), ...ops('batches/2', [1])]);
    expect(deadLetters.asked).toEqual([]);
    expect(ledger.writes).toBe(2);
    // A first state after an overdue mark (the mark stays on the record) is asked about: the mark had its own effect.
    const afterMark = streamRecord({
      ...operation(3, 'RUNNING', true, 'batches/3'),
      previousState: null,
      overdue: { at: '2026-11-30T10:00:02Z', afterSeconds: 60 },
    });
    await handle([message(afterMark)]);
    expect(deadLetters.asked).toEqual(['batches/3#3']);
    // Behind a dead letter, a later version is parked, not delivered.
    sink.failOn.add('batches/1#2');
    now = NOW + 3_600_000;
    await handle(ops('batches/1', [2]));
    await handle(ops('batches/1', [3]));
    expect(sink.delivered).toEqual(['batches/1#1', 'batches/2#1', 'batches/3#3']);
    expect([...deadLetters.letters.values()].map((l) => [l.idempotencyKey, l.reason])).toEqual([
      ['batches/1#2', 'retries-exhausted'],
      ['batches/1#3', 'waiting-behind'],
    ]);
    expect(ledger.writes).toBe(3);
  });

  it('dead-letters at once when the receiver says 410 Gone', async () => {
    const gone: EffectSink = { name: 'gone', deliver: async () => Promise.reject(new SinkError('answered 410', { permanent: true })) };
    const handler = createEffectsHandler({ sinks: [gone], ledger, deadLetters, queue, retry, logger: silentLogger });
    expect(await handler({ Records: ops('batches/1', [1]) })).toEqual({ batchItemFailures: [] });
    expect(deadLetters.letters.get('batches/1#1')).toMatchObject({ reason: 'gone', lastError: 'answered 410' });
    expect(queue.retries).toEqual([]);
  });

  it('dead-letters an undecodable message at once, raw, and delivers the others', async () => {
    const broken = streamRecord(operation(2, 'FAILED'), 'MODIFY');
    // An attribute with no type: what the Streams client made of an empty map before the local mapping repaired it.
    (broken.dynamodb?.NewImage as Record<string, unknown>).result = { M: { error: {} } };
    const messages = [...ops('batches/1', [1]), message(broken), message(broken, { body: 'not json' }), ...ops('batches/2', [1])];
    expect(await handle(messages)).toEqual({ batchItemFailures: [] });
    expect(sink.delivered.sort()).toEqual(['batches/1#1', 'batches/2#1']);
    expect(deadLetters.undecodable).toEqual([
      {
        record: broken,
        reason: expect.stringMatching(/e2 cannot be decoded: No value defined/),
        sequence: broken.dynamodb?.SequenceNumber,
        name: 'batches/1',
      },
      {
        record: 'not json',
        reason: expect.stringMatching(/message body is not a stream record/),
        sequence: expect.any(String),
        name: null,
      },
    ]);
  });

  it('on a redelivery, delivers only what the ledger has not seen', async () => {
    sink.failOn.add('batches/1#2');
    await handle(ops('batches/1', [1, 2]));
    sink.failOn.clear();
    expect(await handle(ops('batches/1', [1, 2]))).toEqual({ batchItemFailures: [] });
    expect(sink.delivered).toEqual(['batches/1#1', 'batches/1#2']);
  });
});

describe('nextAttempt', () => {
  const settings = { baseMs: 100, maxMs: 1_000, forSeconds: 10 };
  it('doubles from the base, caps at the maximum and at the end of the window, then dead-letters', () => {
    const at = (number: number, nowMs = 0) => nextAttempt({ number, firstAttemptAtMs: 0, nowMs, permanent: false }, settings);
    expect([1, 2, 3, 4, 5].map((n) => at(n))).toEqual([100, 200, 400, 800, 1_000].map((retryInMs) => ({ retryInMs })));
    expect(at(30, 9_700)).toEqual({ retryInMs: 300 });
    expect(at(31, 10_000)).toEqual({ deadLetter: 'retries-exhausted' });
    expect(nextAttempt({ number: 1, firstAttemptAtMs: 0, nowMs: 0, permanent: true }, settings)).toEqual({ deadLetter: 'gone' });
  });
});

describe('WebhookSink', () => {
  const secret = newSecret();

  it('signs an overdue mark as operation.overdue, which verifyEffect accepts with its overdue fields', async () => {
    const marked = transitionOf({
      ...operation(3, 'RUNNING'),
      previousState: 'RUNNING',
      stateChanged: false,
      source: 'overdue',
      createdAt: '2026-11-30T08:00:00.000000000Z',
      overdue: { at: '2026-11-30T10:00:03.000000000Z', afterSeconds: 7200 },
    } as OperationRecord);
    let sent: { headers: Record<string, string>; body: string } | undefined;
    await new WebhookSink('http://127.0.0.1:9/hook', secret, {
      post: async (request) => {
        sent = request;
        return { status: 204 };
      },
    }).deliver(marked);
    expect(verifyEffect(sent?.headers as Record<string, string>, sent?.body as string, secret)).toMatchObject({
      id: 'batches/1#3',
      type: 'operation.overdue',
      data: {
        state: 'RUNNING',
        version: 3,
        overdue: { at: '2026-11-30T10:00:03.000000000Z', afterSeconds: 7200, openSince: '2026-11-30T08:00:00.000000000Z' },
      },
    });
    // A state change of the same job is still a state change.
    expect(effectEvent(transitionOf({ ...operation(4, 'SUCCEEDED'), overdue: { at: 'x', afterSeconds: 1 } } as OperationRecord)).type).toBe(
      'operation.state_changed',
    );
  });

  it('signs an outcome learnt after the state as operation.result, which verifyEffect types with its provider and counts', async () => {
    const learnt = transitionOf({
      ...operation(2, 'SUCCEEDED', false, 'openai/batches/batch_1'),
      kind: 'openai-batch',
      provider: 'openai',
      previousState: 'SUCCEEDED',
      resultWrite: true,
      result: { requestCounts: { total: 3, succeeded: 2, failed: 1 }, outputFileId: 'file-out', errorFileId: 'file-err' },
    } as OperationRecord);
    let sent: { headers: Record<string, string>; body: string } | undefined;
    await new WebhookSink('http://127.0.0.1:9/hook', secret, {
      post: async (request) => {
        sent = request;
        return { status: 204 };
      },
    }).deliver(learnt);
    const event = verifyEffect(sent?.headers as Record<string, string>, sent?.body as string, secret);
    expect(event).toMatchObject({
      id: 'openai/batches/batch_1#2',
      type: 'operation.result',
      data: { kind: 'openai-batch', provider: 'openai', state: 'SUCCEEDED', previousState: 'SUCCEEDED', version: 2 },
    });
    // Typed: a receiver reads the counts without a cast.
    const succeeded: number | string | undefined = event.data.result?.requestCounts?.succeeded;
    expect([succeeded, event.data.result?.outputFileId]).toEqual([2, 'file-out']);
  });

  it("gives the provider of an effect from a Ratchet that sent none (before providers): its kind's", async () => {
    const { data, ...event } = effectEvent(transitionOf(operation(2, 'SUCCEEDED')));
    const { provider: _none, ...before } = data;
    const body = JSON.stringify({ ...event, data: before });
    const now = new Date();
    const headers = {
      'webhook-id': 'batches/1#2',
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign('batches/1#2', now, body),
    };
    expect(body).not.toContain('"provider"');
    expect(verifyEffect(headers, body, secret).data.provider).toBe('gemini');
  });

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
            provider: 'gemini',
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

  it('one attempt per call: a non-2xx answer and a timeout are errors to retry, with the same id', async () => {
    const sink = new WebhookSink(receiver.url, secret, { timeoutMs: 200 });
    receiver.mode = 'fail';
    await expect(sink.deliver(transition)).rejects.toThrow(/batches\/1#2 not delivered: answered 503/);
    receiver.mode = 'hang';
    await expect(sink.deliver(transition)).rejects.toThrow(/no answer within 200 ms/);
    expect(receiver.refused).toBe(2);
    receiver.mode = 'ok';
    await sink.deliver(transition);
    expect(receiver.accepted.map((d) => d.id)).toEqual(['batches/1#2']);
  });

  it('never follows a redirect: 302 and 307 are failures to retry, not deliveries', async () => {
    const sink = new WebhookSink(receiver.url, secret);
    for (const mode of ['redirect-302', 'redirect-307'] as const) {
      receiver.mode = mode;
      const error = await sink.deliver(transition).catch((e) => e);
      expect(error).toBeInstanceOf(SinkError);
      expect(error).toMatchObject({
        permanent: false,
        message: expect.stringMatching(/answered 30[27] (Found|Temporary Redirect) \(redirects are not followed\)/),
      });
    }
    expect(receiver.followedRedirects).toBe(0);
  });

  it('410 Gone is permanent', async () => {
    receiver.mode = 'gone';
    await expect(new WebhookSink(receiver.url, secret).deliver(transition)).rejects.toMatchObject({ permanent: true });
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
