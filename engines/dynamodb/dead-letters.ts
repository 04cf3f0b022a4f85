/** The dead letters in AWS: a DynamoDB table (partition: the operation, sort: the version), kept 30 days by TTL. */
import { DeleteCommand, type DynamoDBDocumentClient, PutCommand, QueryCommand, ScanCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import {
  DEAD_LETTER_RETENTION_SECONDS,
  type DeadLetter,
  type DeadLetters,
  entryOf,
  UNDECODABLE,
  type Undecodable,
} from '../../app/effects/dead-letters.ts';
import { DEAD_LETTER_KEYS, DEAD_LETTER_TTL_ATTRIBUTE } from './tables.ts';

export class DynamoDbDeadLetters implements DeadLetters {
  constructor(
    private readonly client: DynamoDBDocumentClient,
    private readonly tableName: string,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  private expiresAt(): number {
    return Math.floor(this.clock().getTime() / 1000) + DEAD_LETTER_RETENTION_SECONDS;
  }

  async parkUndecodable({ sequence, name, raw }: Undecodable, reason: string): Promise<void> {
    await this.client.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          [DEAD_LETTER_KEYS.partition]: UNDECODABLE,
          [DEAD_LETTER_KEYS.sort]: sequence,
          name,
          reason,
          // As received, as a string: nothing about it is lost or re-encoded.
          raw: typeof raw === 'string' ? raw : JSON.stringify(raw),
          deadLetteredAt: this.clock().toISOString(),
          [DEAD_LETTER_TTL_ATTRIBUTE]: this.expiresAt(),
        },
      }),
    );
  }

  async put(letter: DeadLetter): Promise<void> {
    await this.client.send(
      new PutCommand({
        TableName: this.tableName,
        Item: {
          [DEAD_LETTER_KEYS.partition]: letter.name,
          [DEAD_LETTER_KEYS.sort]: entryOf(letter.version),
          ...letter,
          [DEAD_LETTER_TTL_ATTRIBUTE]: this.expiresAt(),
        },
      }),
    );
  }

  async holdsBack(name: string, version: number): Promise<boolean> {
    const { Items = [] } = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: '#pk = :name AND #sk < :entry',
        FilterExpression: '#status = :dead',
        ExpressionAttributeNames: { '#pk': DEAD_LETTER_KEYS.partition, '#sk': DEAD_LETTER_KEYS.sort, '#status': 'status' },
        ExpressionAttributeValues: { ':name': name, ':entry': entryOf(version), ':dead': 'dead' },
        ConsistentRead: true,
      }),
    );
    return Items.length > 0;
  }

  async remove(name: string, version: number): Promise<void> {
    await this.client.send(
      new DeleteCommand({
        TableName: this.tableName,
        Key: { [DEAD_LETTER_KEYS.partition]: name, [DEAD_LETTER_KEYS.sort]: entryOf(version) },
      }),
    );
  }

  async markRedriving(name: string, version: number): Promise<void> {
    await this.client.send(
      new UpdateCommand({
        TableName: this.tableName,
        Key: { [DEAD_LETTER_KEYS.partition]: name, [DEAD_LETTER_KEYS.sort]: entryOf(version) },
        UpdateExpression: 'SET #status = :redriving',
        ExpressionAttributeNames: { '#status': 'status' },
        ExpressionAttributeValues: { ':redriving': 'redriving' },
      }),
    );
  }

  private async scan(): Promise<Record<string, unknown>[]> {
    const items: Record<string, unknown>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const page = await this.client.send(new ScanCommand({ TableName: this.tableName, ExclusiveStartKey: start, ConsistentRead: true }));
      items.push(...(page.Items ?? []));
      start = page.LastEvaluatedKey;
    } while (start);
    return items;
  }

  async list(): Promise<DeadLetter[]> {
    const letters = (await this.scan())
      .filter((item) => item[DEAD_LETTER_KEYS.partition] !== UNDECODABLE)
      .map((item) => {
        const { [DEAD_LETTER_KEYS.partition]: _p, [DEAD_LETTER_KEYS.sort]: _s, [DEAD_LETTER_TTL_ATTRIBUTE]: _t, ...letter } = item;
        return letter as unknown as DeadLetter;
      });
    return letters.sort((a, b) => (a.name === b.name ? a.version - b.version : a.name < b.name ? -1 : 1));
  }

  async listUndecodable() {
    return (await this.scan())
      .filter((item) => item[DEAD_LETTER_KEYS.partition] === UNDECODABLE)
      .map((item) => ({
        sequence: item[DEAD_LETTER_KEYS.sort] as string,
        name: (item.name as string | null) ?? null,
        reason: item.reason as string,
        raw: item.raw as string,
      }));
  }
}
