/**
 * The baseline: the seed article's receiver, implemented faithfully so
 * Ratchet is measured against it side by side. Per delivery: verify the
 * Standard Webhooks signature, read the item (consistent), compare (rank, then
 * the raw time strings as sent), and write the whole item with a condition on
 * `version`; on a lost race read again, up to 4 retries, after which the
 * delivery is answered 200 anyway: the event is lost, and counted here.
 *
 * Its store is DynamoDB (beside the AWS path), SQLite (beside the embedded
 * engine, the seed's own store) or PostgreSQL (beside that engine); without a store it is the floor: verify the
 * signature, answer 200, keep nothing.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { rankOf } from '../core/lifecycle.ts';
import type { Sqlite } from '../engines/sqlite/sqlite.ts';
import { WEBHOOK_EVENT_TYPES } from '../providers/gemini/webhook.ts';

export const SEED_RETRIES = 4;

export interface SeedItem {
  name: string;
  state: string;
  updateTime: string;
  version: number;
}

/** The seed's two requests: a consistent read, and a write conditional on the version read (false: lost the race). */
export interface SeedStore {
  get(name: string): Promise<SeedItem | undefined>;
  put(item: SeedItem, expectedVersion: number | undefined): Promise<boolean>;
}

export class DynamoDbSeedStore implements SeedStore {
  constructor(
    private readonly documents: DynamoDBDocumentClient,
    private readonly table: string,
  ) {}

  async get(name: string): Promise<SeedItem | undefined> {
    const { Item } = await this.documents.send(new GetCommand({ TableName: this.table, Key: { name }, ConsistentRead: true }));
    return Item as SeedItem | undefined;
  }

  async put(item: SeedItem, expectedVersion: number | undefined): Promise<boolean> {
    try {
      await this.documents.send(
        new PutCommand({
          TableName: this.table,
          Item: item,
          ConditionExpression: expectedVersion !== undefined ? 'version = :v' : 'attribute_not_exists(#n)',
          ...(expectedVersion !== undefined
            ? { ExpressionAttributeValues: { ':v': expectedVersion } }
            : { ExpressionAttributeNames: { '#n': 'name' } }),
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }
}

/** The seed's SQL: one autocommitted statement per request, on the same binding and settings as the embedded engine. */
export class SqliteSeedStore implements SeedStore {
  constructor(private readonly db: Sqlite) {
    db.connection.exec('CREATE TABLE IF NOT EXISTS seed (name TEXT PRIMARY KEY, state TEXT, update_time TEXT, version INTEGER)');
  }

  async get(name: string): Promise<SeedItem | undefined> {
    const row = this.db.get<{ name: string; state: string; update_time: string; version: number }>(
      'SELECT * FROM seed WHERE name = ?',
      name,
    );
    return row && { name: row.name, state: row.state, updateTime: row.update_time, version: row.version };
  }

  async put(item: SeedItem, expectedVersion: number | undefined): Promise<boolean> {
    const { changes } =
      expectedVersion === undefined
        ? this.db.run('INSERT OR IGNORE INTO seed VALUES (?, ?, ?, ?)', item.name, item.state, item.updateTime, item.version)
        : this.db.run(
            'UPDATE seed SET state = ?, update_time = ?, version = ? WHERE name = ? AND version = ?',
            item.state,
            item.updateTime,
            item.version,
            item.name,
            expectedVersion,
          );
    return changes === 1;
  }
}

/**
 * The seed's recipe on PostgreSQL: the same two requests, each one
 * autocommitted statement on a `pg` pool (no transaction, no lock held between
 * them), in a table of its own.
 */
export class PostgresSeedStore implements SeedStore {
  private constructor(
    private readonly pool: pg.Pool,
    private readonly table: string,
  ) {}

  static async open(url: string, table: string, connections = 10): Promise<PostgresSeedStore> {
    const pool = new pg.Pool({ connectionString: url, max: connections });
    await pool.query(`CREATE TABLE IF NOT EXISTS ${table} (name text PRIMARY KEY, state text, update_time text, version integer)`);
    return new PostgresSeedStore(pool, table);
  }

  async get(name: string): Promise<SeedItem | undefined> {
    const { rows } = await this.pool.query<{ name: string; state: string; update_time: string; version: number }>(
      `SELECT * FROM ${this.table} WHERE name = $1`,
      [name],
    );
    const row = rows[0];
    return row && { name: row.name, state: row.state, updateTime: row.update_time, version: row.version };
  }

  async put(item: SeedItem, expectedVersion: number | undefined): Promise<boolean> {
    const { rowCount } =
      expectedVersion === undefined
        ? await this.pool.query(`INSERT INTO ${this.table} VALUES ($1, $2, $3, $4) ON CONFLICT (name) DO NOTHING`, [
            item.name,
            item.state,
            item.updateTime,
            item.version,
          ])
        : await this.pool.query(`UPDATE ${this.table} SET state = $2, update_time = $3, version = $4 WHERE name = $1 AND version = $5`, [
            item.name,
            item.state,
            item.updateTime,
            item.version,
            expectedVersion,
          ]);
    return rowCount === 1;
  }
}

export class SeedBaseline {
  lost = 0;
  private server?: Server;
  private readonly webhook: Webhook;

  /** No store: the floor (verify, answer 200). */
  constructor(
    private readonly store: SeedStore | undefined,
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
        if (req.url === '/lost') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ lost: this.lost }));
          return;
        }
        try {
          this.webhook.verify(raw, req.headers as Record<string, string>);
        } catch {
          res.writeHead(401).end();
          return;
        }
        try {
          const applied = this.store ? await this.ingest(this.store, JSON.parse(raw)) : false;
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ applied }));
        } catch {
          res.writeHead(500).end();
        }
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  private async ingest(
    store: SeedStore,
    body: { type: string; timestamp: string; data: { id: string; update_time?: string } },
  ): Promise<boolean> {
    const mapped = WEBHOOK_EVENT_TYPES[body.type];
    if (!mapped) return false;
    const name = body.data.id;
    const updateTime = body.data.update_time ?? body.timestamp;
    for (let attempt = 0; attempt <= SEED_RETRIES; attempt++) {
      const item = await store.get(name);
      if (item) {
        const stored = rankOf(item.state as never);
        const incoming = rankOf(mapped.state);
        if (incoming < stored || (incoming === stored && !(updateTime > item.updateTime))) return false;
      }
      if (await store.put({ name, state: mapped.state, updateTime, version: (item?.version ?? 0) + 1 }, item?.version)) return true;
    }
    this.lost++; // max retries exceeded: answered OK all the same
    return false;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
