/**
 * The effects queue's backoff in AWS: the SQS message's visibility timeout.
 * The SQS client loads on the first backoff only (a delivered effect needs none).
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';

/** The message attribute that marks a re-driven transition. */
export const REDRIVEN_ATTRIBUTE = 'redriven';

/** SQS: makes a received message visible again only after a delay: the queue's backoff. */
export interface RetryScheduler {
  retryAfter(message: SQSRecord, delayMs: number): Promise<void>;
}

/** SQS's own: the message's visibility timeout (whole seconds, at most 12 h). */
export class SqsRetryScheduler implements RetryScheduler {
  private sqs?: Promise<{ client: SQSClient; sdk: typeof import('@aws-sdk/client-sqs') }>;

  constructor(private readonly queueUrl: string) {}

  async retryAfter(message: SQSRecord, delayMs: number): Promise<void> {
    this.sqs ??= import('@aws-sdk/client-sqs').then((sdk) => ({ client: new sdk.SQSClient({}), sdk }));
    const { client, sdk } = await this.sqs;
    await client.send(
      new sdk.ChangeMessageVisibilityCommand({
        QueueUrl: this.queueUrl,
        ReceiptHandle: message.receiptHandle,
        // 0: visible again now (the rest of a group behind a failed message).
        VisibilityTimeout: Math.min(12 * 3600, Math.max(0, Math.ceil(delayMs / 1000))),
      }),
    );
  }
}
