/**
 * A test-only HTTP receiver for Ratchet's outbound webhooks: it checks each
 * signature, dedupes by webhook-id, and can fail (5xx) or hang for a while.
 */
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  id: string;
  body: {
    type: string;
    timestamp: string;
    data: {
      name: string;
      kind: string;
      state: string;
      previousState: string | null;
      version: number;
      userMetadata?: Record<string, unknown>;
    };
  };
  signatureValid: boolean;
}

/** `redirect-302`/`redirect-307` point elsewhere on this receiver, which answers anything there with 200. */
export type ReceiverMode = 'ok' | 'fail' | 'bad-request' | 'hang' | 'gone' | 'redirect-302' | 'redirect-307';

export class Receiver {
  /** Every request that got a 2xx, in arrival order (with redeliveries). */
  readonly accepted: Delivery[] = [];
  /** Requests refused while failing, hanging, gone or redirecting. */
  refused = 0;
  /** Each accepted request's webhook-id, the path it came to (with its query: senders told apart by it), and when (epoch ms). */
  readonly arrivals: Array<{ id: string; path: string; at: number }> = [];
  /** When each webhook-id was first accepted (ms since the epoch): for effect-lag figures. */
  readonly firstAcceptedAt = new Map<string, number>();
  /** Requests that followed a redirect here. */
  followedRedirects = 0;
  /** Called with each accepted request before it is answered: a test acts at that exact moment (a fault injected). */
  onAccepted?: (arrival: { id: string; path: string; at: number }) => void;
  /** When set, only deliveries for which it returns true are refused (per mode); the rest are accepted. */
  refuseOnly?: (name: string) => boolean;
  mode: ReceiverMode = 'ok';
  /** How long each accepted delivery takes to be answered (a slow receiver: a sender's claim must outlast it). */
  delayMs = 0;
  private server?: Server;

  constructor(private readonly secret: string) {}

  get url(): string {
    if (!this.server) throw new Error('receiver not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/effects`;
  }

  /** First acceptance of each webhook-id: what an idempotent sink applies. */
  applied(): Delivery[] {
    const seen = new Set<string>();
    return this.accepted.filter((d) => !seen.has(d.id) && seen.add(d.id));
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let raw = '';
      req.on('data', (chunk) => {
        raw += chunk;
      });
      req.on('end', () => {
        if (req.url === '/elsewhere') {
          this.followedRedirects++;
          res.writeHead(200).end('ok');
          return;
        }
        let name = '';
        try {
          name = JSON.parse(raw).data.name;
        } catch {}
        const mode = this.refuseOnly && !this.refuseOnly(name) ? 'ok' : this.mode;
        if (mode === 'gone') {
          this.refused++;
          res.writeHead(410).end();
          return;
        }
        if (mode === 'redirect-302' || mode === 'redirect-307') {
          this.refused++;
          res.writeHead(Number(mode.slice(-3)), { location: '/elsewhere' }).end();
          return;
        }
        if (mode === 'hang') {
          this.refused++;
          return; // never answer; the sender's timeout fires
        }
        if (mode === 'fail' || mode === 'bad-request') {
          this.refused++;
          res.writeHead(mode === 'fail' ? 503 : 400).end();
          return;
        }
        const id = String(req.headers['webhook-id']);
        const timestamp = String(req.headers['webhook-timestamp']);
        const key = Buffer.from(this.secret.replace(/^whsec_/, ''), 'base64');
        const expected = `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${raw}`).digest('base64')}`;
        const signatureValid = String(req.headers['webhook-signature']).split(' ').includes(expected);
        this.accepted.push({ id, body: JSON.parse(raw), signatureValid });
        const arrival = { id, path: String(req.url), at: Date.now() };
        this.arrivals.push(arrival);
        this.onAccepted?.(arrival);
        if (!this.firstAcceptedAt.has(id)) this.firstAcceptedAt.set(id, Date.now());
        if (this.delayMs > 0) setTimeout(() => res.writeHead(204).end(), this.delayMs);
        else res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async stop(): Promise<void> {
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

/** Polls until `check` returns true, or fails after `timeoutMs`. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
