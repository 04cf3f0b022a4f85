/**
 * `POST /webhooks/gemini`: Gemini's deliveries in, the use case in
 * app/http/webhook.ts. Its signature is its credential (the front end's
 * guard lets it through). Another provider's webhook is a file beside it.
 */
import { type Handler, Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { awsErrors, IN_APP, json } from '../describe.ts';
import { MAX_WEBHOOK_BODY_BYTES, receiveWebhook, type WebhookDeps } from '../webhook.ts';
import { fail, limit, type Route, serve } from './common.ts';

export interface GeminiWebhookDeps extends WebhookDeps {
  /** The webhook's receiver, when the runtime also calls it outside the app (local/http-server.ts): one instance for both. */
  receive?: ReturnType<typeof receiveWebhook>;
}

/** The headers every delivery carries, whatever signs it. */
export const WEBHOOK_HEADERS = {
  'webhook-id': "Standard Webhooks' `webhook-id`: the delivery's id, the same on each of its retries.",
  'webhook-timestamp': "Standard Webhooks' `webhook-timestamp`: unix seconds, within 300 s of now.",
  'webhook-signature':
    "Space-separated signatures: `v1,<base64>` (HMAC-SHA256, a static webhook), `v1a,<base64>` (Ed25519, a dynamic webhook), or a dynamic webhook's JWT (`xxx.yyy.zzz`, RS256), which signs the delivery but not its body.",
};

export const GEMINI_WEBHOOK: Route = {
  method: 'post',
  path: '/webhooks/gemini',
  doc: () => ({
    operationId: 'receiveWebhook',
    tags: ['webhook'],
    summary: "Gemini's webhook deliveries",
    description:
      'A delivery signed by Standard Webhooks (HMAC or Ed25519) or by a dynamic webhook JWT. Every authentic delivery is answered 200, whatever it holds: applied, discarded with the reason, or unprocessable (kept under `GET /decisions`). Its signature is its credential.',
    security: [],
    // Every scheme, a dynamic webhook's JWT included, needs all three: a delivery without one is a 401.
    parameters: Object.entries(WEBHOOK_HEADERS).map(([name, description]) => ({
      name,
      in: 'header',
      required: true,
      description,
      schema: { type: 'string' },
    })),
    requestBody: {
      required: true,
      description: "Gemini's event envelope, exactly as signed (at most 256 KiB).",
      content: { 'application/json': { schema: { type: 'object' } } },
    },
    responses: {
      200: { description: 'An authentic delivery, applied or not.', content: json('WebhookAnswer') },
      ...awsErrors(
        'invalid-signature',
        'payload-too-large',
        'rate-limited',
        'not-recorded',
        'not-configured',
        'keys-unavailable',
        'overloaded',
        'internal',
        ...IN_APP,
      ),
    },
  }),
};

export function geminiWebhookRoutes(deps: GeminiWebhookDeps): Hono {
  const app = new Hono();
  serve(app, GEMINI_WEBHOOK, limit(MAX_WEBHOOK_BODY_BYTES), answerDeliveries(deps.receive ?? receiveWebhook(deps), deps.logger));
  return app;
}

/** The handler of a webhook route: the raw body, as signed, to its receiver, and the receiver's answer back. */
export function answerDeliveries(receive: ReturnType<typeof receiveWebhook>, logger: WebhookDeps['logger']): Handler {
  return async (c) => {
    let raw: string;
    try {
      raw = await c.req.text();
    } catch (error) {
      // Inside an app: a body parser in front of the mount (express.json()) read the stream first.
      if (!(error instanceof TypeError)) throw error;
      logger.error('webhook body unreadable: read before Ratchet got it', { detail: error.message });
      return fail(
        'internal',
        'the request body was read before Ratchet got it: something in front of Ratchet (a body parser such as express.json()) took it; mount Ratchet before any body parser',
      );
    }
    const answer = await receive(raw, c.req.raw.headers);
    if (answer.retryAfterSeconds !== undefined) c.header('retry-after', String(answer.retryAfterSeconds));
    return c.json(answer.body, answer.status as ContentfulStatusCode);
  };
}
