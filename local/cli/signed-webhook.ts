/**
 * One delivery, signed as Standard Webhooks `v1` with `secret`: what `npm run webhook` and the demo send. Gemini,
 * OpenAI and Azure OpenAI all sign this way, so the body (in the provider's shape) is the caller's.
 */
import { Webhook } from 'standardwebhooks';

export function postSignedWebhook(url: string, secret: string, webhookId: string, body: string): Promise<Response> {
  const now = new Date();
  return fetch(url, {
    method: 'POST',
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': webhookId,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': new Webhook(secret).sign(webhookId, now, body),
    },
  });
}
