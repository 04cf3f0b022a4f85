/**
 * Test-side Gemini deliveries: envelopes and Standard Webhooks signatures,
 * computed with node:crypto rather than with the library under test.
 */
import { createHmac, randomBytes, randomUUID } from 'node:crypto';

export function newSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export function sign(secret: string, id: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

export interface SignedDelivery {
  body: string;
  headers: Record<string, string>;
}

export function signedDelivery(secret: string, payload: unknown, options: { id?: string; timestamp?: number } = {}): SignedDelivery {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const id = options.id ?? `msg_${randomUUID()}`;
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': sign(secret, id, timestamp, body),
    },
  };
}

export function envelope(type: string, data: Record<string, unknown>, timestamp = '2026-11-30T10:00:00Z') {
  return { type, version: 'v1', timestamp, data };
}
