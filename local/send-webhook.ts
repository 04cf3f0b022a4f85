/**
 * `npm run webhook -- <type> <id> [timestamp]`: sends one signed Gemini-style
 * delivery to a running Ratchet, to try it by hand.
 *
 *   WEBHOOK_SIGNING_SECRETS=whsec_… npm run webhook -- batch.succeeded batches/123
 */
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

const [type, id, timestamp = new Date().toISOString()] = process.argv.slice(2);
const secret = process.env.WEBHOOK_SIGNING_SECRETS?.split(/[\s,]+/).find(Boolean);
const url = process.env.RATCHET_URL ?? `http://${process.env.HOST ?? '127.0.0.1'}:${process.env.PORT ?? 3000}`;
if (!type || !id || !secret) {
  console.error('usage: WEBHOOK_SIGNING_SECRETS=whsec_… [RATCHET_URL=http://127.0.0.1:3000] npm run webhook -- <type> <id> [timestamp]');
  process.exit(2);
}

const body = JSON.stringify({ type, version: 'v1', timestamp, data: { id } });
const messageId = `msg_${randomUUID()}`;
const now = new Date();
const response = await fetch(`${url}/webhooks/gemini`, {
  method: 'POST',
  body,
  headers: {
    'content-type': 'application/json',
    'webhook-id': messageId,
    'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(messageId, now, body),
  },
});
console.log(response.status, await response.text());
