/**
 * Dead letters of the effects path, whole: what could not be delivered, kept
 * (30 days) with everything needed to look at it or deliver it later.
 *
 * A stream record that cannot be decoded is parked here at once, with its raw
 * image, instead of being retried: retrying cannot decode it, and it must
 * never hold up the records behind it.
 */
import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { DynamoDBRecord } from 'aws-lambda';

export interface DeadLetters {
  parkUndecodable(record: DynamoDBRecord, reason: string): Promise<void>;
}

/** Partition: the operation's name (or UNDECODABLE); sort: the entry within it. */
export const DEAD_LETTER_KEYS = { partition: 'operation', sort: 'entry' } as const;
export const DEAD_LETTER_TTL_ATTRIBUTE = 'expiresAt';
export const UNDECODABLE = '#undecodable';
export const DEAD_LETTER_RETENTION_SECONDS = 30 * 24 * 3600;

export function deadLetterTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [
      { AttributeName: DEAD_LETTER_KEYS.partition, AttributeType: 'S' },
      { AttributeName: DEAD_LETTER_KEYS.sort, AttributeType: 'S' },
    ],
    KeySchema: [
      { AttributeName: DEAD_LETTER_KEYS.partition, KeyType: 'HASH' },
      { AttributeName: DEAD_LETTER_KEYS.sort, KeyType: 'RANGE' },
    ],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

export class DynamoDbDeadLetters implements DeadLetters {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  async parkUndecodable(record: DynamoDBRecord, reason: string): Promise<void> {
    const now = this.clock();
    await this.client.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          [DEAD_LETTER_KEYS.partition]: UNDECODABLE,
          [DEAD_LETTER_KEYS.sort]: record.dynamodb?.SequenceNumber ?? record.eventID ?? now.toISOString(),
          // The key is a plain string attribute, readable even when the image is not.
          name: record.dynamodb?.Keys?.name?.S ?? null,
          reason,
          // As received (DynamoDB JSON), as a string: nothing about it is lost or re-encoded.
          raw: JSON.stringify(record),
          deadLetteredAt: now.toISOString(),
          [DEAD_LETTER_TTL_ATTRIBUTE]: Math.floor(now.getTime() / 1000) + DEAD_LETTER_RETENTION_SECONDS,
        },
      }),
    );
  }
}
