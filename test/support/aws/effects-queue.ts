/**
 * The local stand-in for the SQS FIFO effects queue and its Lambda event
 * source, with their semantics: one message group per operation, in order;
 * a group with a message in flight or waiting out a backoff delivers nothing
 * else, while other groups go on; messages carry ApproximateReceiveCount and
 * ApproximateFirstReceiveTimestamp; the handler's `retryAfter` is the
 * visibility timeout; a message is deleted when the handler does not report
 * it failed.
 *
 * Persisted in a moto table (`group`, `seq`), so a restart resumes
 * where it stopped, backoffs included; a message in flight at a crash is
 * delivered again after the restart (the ledger skips what was delivered; the
 * window is a delivery whose ledger write did not happen).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { DeleteCommand, type DynamoDBDocumentClient, PutCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBRecord, SQSRecord } from 'aws-lambda';
import { effectsGroupOf } from '../../../engines/dynamodb/tables.ts';
import type { EffectsHandler } from '../../../lambda/effects/process.ts';
import { REDRIVEN_ATTRIBUTE, type RetryScheduler } from '../../../lambda/effects/sqs-retry-scheduler.ts';

interface Message {
  group: string;
  seq: string;
  body: string;
  receiveCount: number;
  firstReceiveAt: number;
  /** When it may be received again after a failed attempt (0: now). */
  retryAt: number;
  redriven: boolean;
}

export function queueTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: 'group', AttributeType: 'S' },
      { AttributeName: 'seq', AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: 'group', KeyType: 'HASH' },
      { AttributeName: 'seq', KeyType: 'RANGE' },
    ],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

export interface LocalEffectsQueueOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
  logger: Logger;
  /** Messages per handler invocation (each from another group), as the event source's batch size. */
  batchSize?: number;
  /** Invocations in flight at once. */
  concurrency?: number;
}

export class LocalEffectsQueue implements RetryScheduler {
  private readonly groups = new Map<string, Message[]>();
  private readonly busy = new Set<string>();
  private handler?: EffectsHandler;
  private inFlight = 0;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly options: LocalEffectsQueueOptions) {}

  /** What waits for one operation, in order: each message's version, attempts so far and when it is tried next (the console). */
  pending(name: string): Array<{ version: number | undefined; receiveCount: number; retryAt: number }> {
    return (this.groups.get(effectsGroupOf(name)) ?? []).map((message) => {
      let version: number | undefined;
      try {
        version = Number(
          (JSON.parse(message.body) as { dynamodb?: { NewImage?: { version?: { N?: string } } } }).dynamodb?.NewImage?.version?.N,
        );
      } catch {
        version = undefined;
      }
      return { version, receiveCount: message.receiveCount, retryAt: message.retryAt };
    });
  }

  /** Loads what a previous run left, then delivers to `handler`. */
  async start(handler: EffectsHandler): Promise<void> {
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.options.documents.send(
        new ScanCommand({ TableName: this.options.tableName, ExclusiveStartKey: start, ConsistentRead: true }),
      );
      for (const item of page.Items ?? []) this.remember(item as unknown as Message);
      start = page.LastEvaluatedKey;
    } while (start);
    this.handler = handler;
    this.pump();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await Promise.all(this.running);
  }

  /** Sends stream records (as the Pipe does): group = the operation, order = the stream's. Idempotent. */
  async send(records: DynamoDBRecord[], options: { redriven?: boolean } = {}): Promise<void> {
    for (const record of records) {
      const name = record.dynamodb?.Keys?.name?.S ?? '';
      const message: Message = {
        group: effectsGroupOf(name),
        seq: (record.dynamodb?.SequenceNumber ?? '').padStart(40, '0'),
        body: JSON.stringify(record),
        receiveCount: 0,
        firstReceiveAt: 0,
        retryAt: 0,
        redriven: options.redriven ?? false,
      };
      await this.options.documents.send(new PutCommand({ TableName: this.options.tableName, Item: { ...message } }));
      this.remember(message, true);
    }
    this.pump();
  }

  async retryAfter(message: SQSRecord, delayMs: number): Promise<void> {
    const [group, seq] = message.receiptHandle.split('|') as [string, string];
    const stored = this.groups.get(group)?.find((m) => m.seq === seq);
    if (!stored) return;
    stored.retryAt = Date.now() + delayMs;
    await this.update(stored);
  }

  private remember(message: Message, replace = false): void {
    const messages = this.groups.get(message.group) ?? [];
    const at = messages.findIndex((m) => m.seq === message.seq);
    if (at >= 0) {
      if (replace && messages[at]?.receiveCount === 0) messages[at] = message;
      return;
    }
    messages.push(message);
    messages.sort((a, b) => (a.seq < b.seq ? -1 : 1));
    this.groups.set(message.group, messages);
  }

  private update(message: Message): Promise<unknown> {
    return this.options.documents.send(
      new UpdateCommand({
        TableName: this.options.tableName,
        Key: { group: message.group, seq: message.seq },
        UpdateExpression: 'SET receiveCount = :count, firstReceiveAt = :first, retryAt = :retry',
        ConditionExpression: 'attribute_exists(#group)',
        ExpressionAttributeNames: { '#group': 'group' },
        ExpressionAttributeValues: { ':count': message.receiveCount, ':first': message.firstReceiveAt, ':retry': message.retryAt },
      }),
    );
  }

  /** Starts invocations for groups whose head is due, then sleeps until the next one is. */
  private pump(): void {
    if (this.stopped || !this.handler) return;
    clearTimeout(this.timer);
    const { batchSize = 10, concurrency = 8 } = this.options;
    const now = Date.now();
    let nextDue = Number.POSITIVE_INFINITY;
    const due: Message[] = [];
    for (const [group, messages] of this.groups) {
      const head = messages[0];
      if (!head || this.busy.has(group)) continue;
      if (head.retryAt <= now) due.push(head);
      else nextDue = Math.min(nextDue, head.retryAt);
    }
    while (due.length > 0 && this.inFlight < concurrency) this.invoke(due.splice(0, batchSize));
    if (due.length > 0) return; // an invocation's end pumps again
    if (nextDue < Number.POSITIVE_INFINITY) this.timer = setTimeout(() => this.pump(), Math.max(0, nextDue - now));
  }

  private invoke(batch: Message[]): void {
    this.inFlight++;
    for (const message of batch) this.busy.add(message.group);
    const run = this.deliver(batch).finally(() => {
      this.inFlight--;
      for (const message of batch) this.busy.delete(message.group);
      this.running.delete(run);
      this.pump();
    });
    this.running.add(run);
  }

  private async deliver(batch: Message[]): Promise<void> {
    const { logger } = this.options;
    const now = Date.now();
    try {
      for (const message of batch) {
        message.receiveCount++;
        message.firstReceiveAt ||= now;
        await this.update(message);
      }
      const { batchItemFailures } = await (this.handler as EffectsHandler)({ Records: batch.map(toSqsRecord) });
      const failed = new Set(batchItemFailures.map((f) => f.itemIdentifier));
      for (const message of batch) {
        if (failed.has(messageId(message))) continue;
        await this.options.documents.send(
          new DeleteCommand({ TableName: this.options.tableName, Key: { group: message.group, seq: message.seq } }),
        );
        const messages = this.groups.get(message.group) ?? [];
        messages.splice(messages.indexOf(message), 1);
        if (messages.length === 0) this.groups.delete(message.group);
      }
    } catch (error) {
      // As with a Lambda that throws: the whole batch is received again, after a pause.
      logger.error('effects queue: delivery failed; the batch is received again shortly', { error });
      for (const message of batch) message.retryAt = Date.now() + 1_000;
    }
  }
}

const messageId = (message: Message) => `${message.group}|${message.seq}`;

/** The message as the SQS event source hands it to Lambda. */
function toSqsRecord(message: Message): SQSRecord {
  return {
    messageId: messageId(message),
    receiptHandle: messageId(message),
    body: message.body,
    attributes: {
      ApproximateReceiveCount: String(message.receiveCount),
      ApproximateFirstReceiveTimestamp: String(message.firstReceiveAt),
      SentTimestamp: String(message.firstReceiveAt),
      SenderId: 'local',
      MessageGroupId: message.group,
      MessageDeduplicationId: message.seq,
      SequenceNumber: message.seq,
    },
    messageAttributes: message.redriven ? { [REDRIVEN_ATTRIBUTE]: { stringValue: 'true', dataType: 'String' } } : {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:local:000000000000:ratchet-effects.fifo',
    awsRegion: 'local',
  } as SQSRecord;
}
