/**
 * What the fake providers (fake-openai.ts, fake-anthropic.ts, fake-bedrock.ts) share: a node:http server on
 * 127.0.0.1 at a free port, a JSON answer, a request's body, and the count of 429s still owed to a caller. Each fake
 * keeps its own routes and error shapes; only the plumbing is here, written once.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What a builder of a provider's object takes: any field of the SDK's type (null too, as the APIs answer them), and others it lacks. */
export type Over<T> = { [K in keyof T]?: T[K] | null } & Record<string, unknown>;

export interface Listening {
  /** `http://127.0.0.1:PORT`, no trailing slash. */
  origin: string;
  close(): Promise<void>;
}

/** Serves `handle` on 127.0.0.1 at a port the system picks; a handler that throws is answered 500. */
export async function listen(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Promise<Listening> {
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) answer(res, 500, { error: { message: String(error) } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export function answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

export async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A request body as an object: JSON, or a multipart form's text fields (the SDKs send some creates as forms). */
export async function fieldsOf(req: IncomingMessage): Promise<Record<string, unknown>> {
  const raw = await bodyOf(req);
  if (raw.length === 0) return {};
  const type = req.headers['content-type'] ?? '';
  if (type.startsWith('multipart/form-data')) {
    const form = await new Response(raw, { headers: { 'content-type': type } }).formData();
    return Object.fromEntries([...form.entries()].filter(([, value]) => typeof value === 'string'));
  }
  return JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
}

/** A lowercase hex id of `bytes` random bytes. */
export function hex(bytes: number): string {
  return randomBytes(bytes).toString('hex');
}

/** The object without its undefined fields, so a builder's defaults stand where a request named nothing. */
export function defined(object: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(object).filter(([, value]) => value !== undefined));
}

export function pause(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

/** The 429s owed, by caller: a count (Infinity until set to 0 again) and the Retry-After each is answered with. */
export class RateLimits {
  private readonly owed = new Map<string, { count: number; retryAfterSeconds: number }>();

  set(caller: string, count: number, retryAfterSeconds: number): void {
    if (count > 0) this.owed.set(caller, { count, retryAfterSeconds });
    else this.owed.delete(caller);
  }

  /** Whether this request of `caller` is answered 429 (one of those owed is used up), with its Retry-After. */
  take(caller: string): { retryAfterSeconds: number } | undefined {
    const limit = this.owed.get(caller);
    if (!limit) return undefined;
    if (--limit.count <= 0) this.owed.delete(caller);
    return { retryAfterSeconds: limit.retryAfterSeconds };
  }
}

/**
 * A newest-first page of `items` (by their time, then the later set first), as the list endpoints answer them:
 * the items after the cursor `after`, or with `before` the `limit` just before it (an unknown cursor: an empty page).
 * `more` says whether items lie beyond the page in the direction read.
 */
export function pageOf<T>(items: T[], idOf: (item: T) => string, options: { limit: number; after?: string; before?: string }) {
  const { limit } = options;
  if (options.before !== undefined) {
    const end = items.findIndex((item) => idOf(item) === options.before);
    const start = Math.max(0, end - limit);
    return end < 0 ? { page: [], more: false } : { page: items.slice(start, end), more: start > 0 };
  }
  const start = options.after === undefined ? 0 : items.findIndex((item) => idOf(item) === options.after) + 1;
  if (options.after !== undefined && start === 0) return { page: [], more: false };
  return { page: items.slice(start, start + limit), more: start + limit < items.length };
}

/** `items` newest first: by `timeOf` descending, those of the same time the later added first. */
export function newestFirst<T>(items: T[], timeOf: (item: T) => number): T[] {
  return items
    .map((item, order) => ({ item, order }))
    .sort((a, b) => timeOf(b.item) - timeOf(a.item) || b.order - a.order)
    .map(({ item }) => item);
}
