/**
 * The effects ledger: which (sink, transition) pairs were delivered. Checked
 * before a delivery and written after it, so a replayed batch skips what was
 * already done. (A crash between delivery and the ledger write redelivers
 * once; the stable webhook-id lets the receiver drop it.)
 */

import type { CreateTableCommandInput } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';

export interface EffectLedger {
  isDelivered(sink: string, key: string): Promise<boolean>;
  markDelivered(sink: string, key: string): Promise<void>;
}

export const LEDGER_PARTITION_KEY = 'key';
const RETENTION_SECONDS = 30 * 24 * 3600;

/** A table with a string `key` and nothing else declared: the ledger, and the local mapping's checkpoints. */
export function keyedTableInput(tableName: string): CreateTableCommandInput {
  return {
    TableName: tableName,
    AttributeDefinitions: [{ AttributeName: LEDGER_PARTITION_KEY, AttributeType: 'S' }],
    KeySchema: [{ AttributeName: LEDGER_PARTITION_KEY, KeyType: 'HASH' }],
    BillingMode: 'PAY_PER_REQUEST',
  };
}

export class DynamoDbEffectLedger implements EffectLedger {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  async isDelivered(sink: string, key: string): Promise<boolean> {
    const { Item } = await this.client.send(
      new GetCommand({ TableName: this.tableName, Key: { [LEDGER_PARTITION_KEY]: `${sink}#${key}` }, ConsistentRead: true }),
    );
    return Item !== undefined;
  }

  async markDelivered(sink: string, key: string): Promise<void> {
    const now = this.clock();
    await this.client.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          [LEDGER_PARTITION_KEY]: `${sink}#${key}`,
          deliveredAt: now.toISOString(),
          expiresAt: Math.floor(now.getTime() / 1000) + RETENTION_SECONDS,
        },
      }),
    );
  }
}

export const LEDGER_TTL_ATTRIBUTE = 'expiresAt';
