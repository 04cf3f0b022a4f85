/**
 * An HTTP proxy in front of moto that counts the item requests
 * (GetItem, PutItem, UpdateItem, …) per table: DynamoDB requests per event are
 * counted, not estimated. Stream reads and table admin pass uncounted. It
 * can add a delay per request, as the network to DynamoDB would.
 */
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const ITEM_OPERATIONS = new Set(['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'Query', 'Scan', 'BatchGetItem', 'BatchWriteItem']);

export class CountingProxy {
  /** `${table} ${operation}` → requests. */
  readonly counts = new Map<string, number>();
  private server?: Server;

  /** `delayMs`: added before each forwarded request, to model DynamoDB's network round trip (moto answers on loopback). */
  constructor(
    private readonly target: string,
    private readonly delayMs = 0,
  ) {}

  get endpoint(): string {
    return `http://127.0.0.1:${((this.server as Server).address() as AddressInfo).port}`;
  }

  /** Item requests against `table` since the last reset. */
  requests(table: string): number {
    let total = 0;
    for (const [key, n] of this.counts) if (key.startsWith(`${table} `)) total += n;
    return total;
  }

  reset(): void {
    this.counts.clear();
  }

  async start(): Promise<this> {
    const target = new URL(this.target);
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk) => chunks.push(chunk));
      req.on('end', async () => {
        if (this.delayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
        const body = Buffer.concat(chunks);
        const operation = String(req.headers['x-amz-target'] ?? '').split('.')[1] ?? '';
        if (ITEM_OPERATIONS.has(operation)) {
          const table = (JSON.parse(body.toString() || '{}') as { TableName?: string }).TableName ?? '?';
          this.counts.set(`${table} ${operation}`, (this.counts.get(`${table} ${operation}`) ?? 0) + 1);
        }
        const upstream = request(
          { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 500, answer.headers);
            answer.pipe(res);
          },
        );
        upstream.on('error', () => res.writeHead(502).end());
        upstream.end(body);
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise<void>((resolve) => this.server?.close(() => resolve()));
  }
}
