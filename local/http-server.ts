/**
 * The runtime's HTTP server: the shared app through @hono/node-server, with
 * what a server that can be overloaded needs in front of it.
 *
 * - **A bound on requests in flight** (HTTP_MAX_IN_FLIGHT). Past it a request
 *   is answered at once, before its body is read or its signature checked:
 *   503 `{"error":"overloaded"}` with `Retry-After: 1`, which Gemini retries.
 *   The connection stays open (Node reads and drops the unread body), so a
 *   sender that sent a whole request always gets an answer, never a reset.
 * - **The webhook without a framework**: `POST /webhooks/gemini` goes
 *   straight to its use case (app/http/webhook.ts, the same instance the
 *   app's route uses), without Hono's Request, Response and streams: the
 *   route every delivery takes costs what it checks. Its answers are the
 *   app's (the same statuses and bodies, the same security headers), and the
 *   same contract tests run against it.
 * - **Waiting is not working**: long polls and change streams (the feed's
 *   routes, `?wait=` on an operation) are held apart, up to FEED_MAX_WAITING
 *   at once, so a thousand idle waiters take no room from deliveries.
 * - **Slow clients are closed**: headers must arrive within
 *   HTTP_HEADERS_TIMEOUT_MS and the whole request within
 *   HTTP_REQUEST_TIMEOUT_MS (Node answers 408 and closes), checked every
 *   second; a fast client on another connection is never held up by them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '@aws-lambda-powertools/logger';
import { getRequestListener } from '@hono/node-server';
import { MAX_WEBHOOK_BODY_BYTES, type WebhookAnswer } from '../app/http/webhook.ts';
import type { HeaderReader } from '../app/http/webhook-signature.ts';
import { FAILURES, failureBody, RETRY_AFTER_SECONDS } from '../core/failures.ts';
import { API_SECURITY_HEADERS } from './access/guard.ts';

export interface HttpLimits {
  maxInFlight: number;
  /** Long polls and change streams held at once (counted apart: they wait, they do not work). */
  maxWaiting: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
}

export type WebhookReceiver = (raw: string, headers: HeaderReader) => Promise<WebhookAnswer>;

const OVERLOADED = JSON.stringify(failureBody('overloaded', 'too many requests in flight; retry after the Retry-After seconds'));

export function listen(
  fetch: (request: Request) => Response | Promise<Response>,
  hostname: string,
  port: number,
  limits: HttpLimits,
  logger: Logger,
  webhook?: WebhookReceiver,
): Promise<Server> {
  const handle = getRequestListener(fetch);
  let inFlight = 0;
  let waiting = 0;
  let shed = 0;
  let lastReport = 0;
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      // How often the two timeouts above are checked (Node's default is every 30 s).
      connectionsCheckingInterval: Math.min(1_000, limits.headersTimeoutMs),
      keepAliveTimeout: 5_000,
    },
    (req: IncomingMessage, res: ServerResponse) => {
      const refuse = (body: string) =>
        res
          .writeHead(FAILURES.overloaded, {
            'content-type': 'application/json',
            'retry-after': String(RETRY_AFTER_SECONDS),
            'cache-control': 'no-store',
          })
          .end(body);
      if (waits(req)) {
        if (waiting >= limits.maxWaiting) return refuse(TOO_MANY_WAITING);
        waiting++;
        res.once('close', () => waiting--);
        return void handle(req, res);
      }
      if (inFlight >= limits.maxInFlight) {
        shed++;
        // One line a second at most, however many are shed.
        if (Date.now() - lastReport >= 1_000) {
          lastReport = Date.now();
          logger.warn('overloaded: requests answered 503 with Retry-After', { shed, inFlight, maxInFlight: limits.maxInFlight });
          shed = 0;
        }
        return refuse(OVERLOADED);
      }
      inFlight++;
      res.once('close', () => inFlight--);
      if (webhook && req.method === 'POST' && req.url === '/webhooks/gemini') void receive(req, res, webhook, logger);
      else void handle(req, res);
    },
  );
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, hostname, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

const TOO_MANY_WAITING = JSON.stringify(
  failureBody('overloaded', 'too many long polls and streams held; retry after the Retry-After seconds'),
);

/** A request that may be held open waiting for a change: the feed's routes and a per-operation long poll. */
function waits(req: IncomingMessage): boolean {
  const url = req.url ?? '';
  return req.method === 'GET' && (url.startsWith('/changes') || (url.startsWith('/operations/') && /[?&](wait|afterVersion)=/.test(url)));
}

/** `POST /webhooks/gemini`, read and answered by hand (see above). */
async function receive(req: IncomingMessage, res: ServerResponse, webhook: WebhookReceiver, logger: Logger): Promise<void> {
  const answer = (status: number, body: unknown, extra: Record<string, string> = {}) => {
    if (res.headersSent) return;
    res.writeHead(status, { 'content-type': 'application/json', ...API_SECURITY_HEADERS, ...extra }).end(JSON.stringify(body));
  };
  const tooLarge = () =>
    // The rest of the body is never read: a client must not reuse this connection.
    answer(FAILURES['payload-too-large'], failureBody('payload-too-large', `body exceeds ${MAX_WEBHOOK_BODY_BYTES} bytes`), {
      connection: 'close',
    });
  try {
    if (Number(req.headers['content-length'] ?? 0) > MAX_WEBHOOK_BODY_BYTES) return tooLarge();
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_WEBHOOK_BODY_BYTES) return tooLarge();
      chunks.push(chunk);
    }
    const headers = {
      get: (name: string) => {
        const value = req.headers[name];
        return value === undefined ? null : Array.isArray(value) ? value.join(', ') : value;
      },
    };
    const result = await webhook(Buffer.concat(chunks, size).toString('utf8'), headers);
    answer(result.status, result.body, result.retryAfterSeconds === undefined ? {} : { 'retry-after': String(result.retryAfterSeconds) });
  } catch (error) {
    logger.error('unhandled error', { error });
    answer(FAILURES.internal, failureBody('internal', 'internal error'));
  }
}
