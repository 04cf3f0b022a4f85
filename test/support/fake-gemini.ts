/**
 * A fake Gemini API on 127.0.0.1, enough for the real @google/genai SDK:
 * `GET /v1beta/batches/{id}` and `GET /v1beta/{operation name}`. States are
 * set by the test as time goes on; faults can be injected per request.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Fault = '429' | '500' | 'slow' | 'malformed' | '404';

export interface FakeBatch {
  state: string;
  updateTime?: string;
}

export interface FakeOperation {
  done?: boolean;
  error?: { code: number; message: string };
  response?: Record<string, unknown>;
}

export class FakeGemini {
  readonly batches = new Map<string, FakeBatch>();
  readonly operations = new Map<string, FakeOperation>();
  /** Faults to answer with, by resource name; each is used once per request until cleared. */
  readonly faults = new Map<string, Fault>();
  /** Every resource name asked for, in order. */
  readonly requests: string[] = [];
  /** Held back answers: a request for a name here waits until `release(name)`. */
  private readonly held = new Map<string, Array<() => void>>();
  readonly holding = new Set<string>();
  private server?: Server;

  constructor(readonly apiKey = 'test-api-key') {}

  get baseUrl(): string {
    if (!this.server) throw new Error('fake Gemini not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Lets the held requests for `name` answer, with the state as it is when they do. */
  release(name: string): void {
    this.holding.delete(name);
    for (const resume of this.held.get(name) ?? []) resume();
    this.held.delete(name);
  }

  async start(): Promise<this> {
    this.server = createServer(async (req, res) => {
      const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname).replace(/^\/v1beta\//, '');
      this.requests.push(path);
      if (req.headers['x-goog-api-key'] !== this.apiKey) return json(res, 401, { error: { code: 401, message: 'API key not valid' } });
      if (this.holding.has(path)) await new Promise<void>((resume) => this.held.set(path, [...(this.held.get(path) ?? []), resume]));
      const fault = this.faults.get(path);
      if (fault === '429') return json(res, 429, { error: { code: 429, message: 'Resource exhausted', status: 'RESOURCE_EXHAUSTED' } });
      if (fault === '500') return json(res, 500, { error: { code: 500, message: 'Internal error', status: 'INTERNAL' } });
      if (fault === '404') return json(res, 404, { error: { code: 404, message: 'not found', status: 'NOT_FOUND' } });
      if (fault === 'malformed') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"name": "batches/');
        return;
      }
      if (fault === 'slow') await new Promise((resolve) => setTimeout(resolve, 15_000));
      const batch = this.batches.get(path);
      if (batch) {
        return json(res, 200, {
          name: path,
          metadata: { '@type': 'type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch', name: path, ...batch },
        });
      }
      const operation = this.operations.get(path);
      if (operation) return json(res, 200, { name: path, ...operation });
      return json(res, 404, { error: { code: 404, message: `${path} not found`, status: 'NOT_FOUND' } });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async stop(): Promise<void> {
    for (const name of [...this.holding]) this.release(name);
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

function json(res: import('node:http').ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
