/**
 * The outbound webhook's HTTP on one machine: one keep-alive pool to the
 * receiver's origin (undici's Pool), at most `connections` sockets open to
 * it at once; deliveries beyond that wait in the pool's queue. A `fetch` per
 * effect costs a Request, a Response and a stream each; `pool.request` costs
 * far less, and the cap is what a receiver can count on.
 */
import { Pool } from 'undici';
import { type Post, WebhookSink, type WebhookSinkSettings } from './webhook-sink.ts';

export function pooledPost(url: string, connections: number): Post {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections, pipelining: 1, keepAliveTimeout: 10_000 });
  const path = `${target.pathname}${target.search}`;
  return async ({ headers, body, timeoutMs, signal }) => {
    const response = await pool.request({
      method: 'POST',
      path,
      headers,
      body,
      ...(signal && { signal }),
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
    // pool.request never follows a redirect: a 3xx is an answer like any other (see WebhookSink).
    await response.body.dump();
    return { status: response.statusCode };
  };
}

/** The outbound webhook, on a pool of its own connections. */
export function webhookSinkOf(settings: WebhookSinkSettings): WebhookSink {
  return new WebhookSink(settings.url, settings.secret, {
    timeoutMs: settings.timeoutMs,
    post: pooledPost(settings.url, settings.connections),
  });
}
