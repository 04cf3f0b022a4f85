/** The effects queue's backoff in AWS: the SQS message's visibility timeout. */
import { ChangeMessageVisibilityCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import type { RetryScheduler } from './queue.ts';

/** SQS's own: the message's visibility timeout (whole seconds, at most 12 h). */
export class SqsRetryScheduler implements RetryScheduler {
  constructor(
    private readonly client: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async retryAfter(message: SQSRecord, delayMs: number): Promise<void> {
    await this.client.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: this.queueUrl,
        ReceiptHandle: message.receiptHandle,
        VisibilityTimeout: Math.min(12 * 3600, Math.max(1, Math.ceil(delayMs / 1000))),
      }),
    );
  }
}
