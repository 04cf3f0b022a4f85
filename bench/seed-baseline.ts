/**
 * The baseline: the seed article's receiver, implemented faithfully so
 * Ratchet is measured against it side by side. Per delivery: verify the
 * Standard Webhooks signature, read the item (consistent), compare (rank, then
 * the raw time strings as sent), and write the whole item with a condition on
 * `version`; on a lost race read again, up to 4 retries, after which the
 * delivery is answered 200 anyway: the event is lost, and counted here.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { Webhook } from 'standardwebhooks';
import { WEBHOOK_EVENT_TYPES } from '../lambda/core/gemini-webhook.ts';
import { rankOf } from '../lambda/core/lifecycle.ts';

export const SEED_RETRIES = 4;

export class SeedBaseline {
  lost = 0;
  private server?: Server;
  private readonly webhook: Webhook;

  constructor(
    private readonly documents: DynamoDBDocumentClient,
    private readonly table: string,
    secret: string,
  ) {
    this.webhook = new Webhook(secret);
  }

  get url(): string {
    return `http://127.0.0.1:${((this.server as Server).address() as AddressInfo).port}/webhooks/gemini`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', async () => {
        const raw = Buffer.concat(chunks).toString();
        try {
          this.webhook.verify(raw, req.headers as Record<string, string>);
        } catch {
          res.writeHead(401).end();
          return;
        }
        try {
          const applied = await this.ingest(JSON.parse(raw));
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ applied }));
        } catch {
          res.writeHead(500).end();
        }
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  private async ingest(body: { type: string; timestamp: string; data: { id: string; update_time?: string } }): Promise<boolean> {
    const mapped = WEBHOOK_EVENT_TYPES[body.type];
    if (!mapped) return false;
    const name = body.data.id;
    const updateTime = body.data.update_time ?? body.timestamp;
    for (let attempt = 0; attempt <= SEED_RETRIES; attempt++) {
      const { Item } = await this.documents.send(new GetCommand({ TableName: this.table, Key: { name }, ConsistentRead: true }));
      if (Item) {
        const stored = rankOf(Item.state);
        const incoming = rankOf(mapped.state);
        if (incoming < stored || (incoming === stored && !(updateTime > Item.updateTime))) return false;
      }
      try {
        await this.documents.send(
          new PutCommand({
            TableName: this.table,
            Item: { name, state: mapped.state, updateTime, version: (Item?.version ?? 0) + 1 },
            ConditionExpression: Item ? 'version = :v' : 'attribute_not_exists(#n)',
            ...(Item ? { ExpressionAttributeValues: { ':v': Item.version } } : { ExpressionAttributeNames: { '#n': 'name' } }),
          }),
        );
        return true;
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) throw error;
      }
    }
    this.lost++; // max retries exceeded: answered OK all the same
    return false;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
