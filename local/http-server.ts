/**
 * The runtime's HTTP server: the shared app through @hono/node-server, with
 * what a server that can be overloaded needs in front of it.
 *
 * - **A bound on requests in flight** (HTTP_MAX_IN_FLIGHT). Past it a request
 *   is answered at once, before its body is read or its signature checked:
 *   503 `{"error":"overloaded"}` with `Retry-After: 1`, which Gemini retries.
 *   The connection stays open (Node reads and drops the unread body), so a
 *   sender that sent a whole request always gets an answer, never a reset.
 * - **Slow clients are closed**: headers must arrive within
 *   HTTP_HEADERS_TIMEOUT_MS and the whole request within
 *   HTTP_REQUEST_TIMEOUT_MS (Node answers 408 and closes), checked every
 *   second; a fast client on another connection is never held up by them.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Logger } from '@aws-lambda-powertools/logger';
import { getRequestListener } from '@hono/node-server';
import { FAILURES, failureBody } from '../lambda/http/webhook.ts';

export interface HttpLimits {
  maxInFlight: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
}

const OVERLOADED = JSON.stringify(failureBody('overloaded', 'too many requests in flight; retry after the Retry-After seconds'));

export function listen(
  fetch: (request: Request) => Response | Promise<Response>,
  hostname: string,
  port: number,
  limits: HttpLimits,
  logger: Logger,
): Promise<Server & { inFlight(): number }> {
  const handle = getRequestListener(fetch);
  let inFlight = 0;
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
      if (inFlight >= limits.maxInFlight) {
        shed++;
        // One line a second at most, however many are shed.
        if (Date.now() - lastReport >= 1_000) {
          lastReport = Date.now();
          logger.warn('overloaded: requests answered 503 with Retry-After', { shed, inFlight, maxInFlight: limits.maxInFlight });
          shed = 0;
        }
        res
          .writeHead(FAILURES.overloaded, { 'content-type': 'application/json', 'retry-after': '1', 'cache-control': 'no-store' })
          .end(OVERLOADED);
        return;
      }
      inFlight++;
      res.once('close', () => inFlight--);
      void handle(req, res);
    },
  ) as Server & { inFlight(): number };
  server.inFlight = () => inFlight;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, hostname, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}
