/** The effects ledger in AWS: a DynamoDB table keyed by `<sink>#<name>#<version>`, kept 30 days by TTL. */
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { type DeliveryAttempts, type EffectLedger, LEDGER_RETENTION_SECONDS } from '../../app/effects/ledger.ts';
import { LEDGER_PARTITION_KEY } from './tables.ts';

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

  async markDelivered(sink: string, key: string, attempts?: DeliveryAttempts): Promise<void> {
    const now = this.clock();
    await this.client.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          [LEDGER_PARTITION_KEY]: `${sink}#${key}`,
          deliveredAt: now.toISOString(),
          expiresAt: Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS,
          ...(attempts && { attempts: attempts.attempts, ...(attempts.earlierFailure && { earlierFailure: attempts.earlierFailure }) }),
        },
      }),
    );
  }
}
