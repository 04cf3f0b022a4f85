/**
 * A bare end (OpenAI's webhook names the job alone) asks for the poll that brings
 * the outcome: for a job known before it, that job made due now (pollNow); for a
 * job the delivery itself made (due already from its first write), reconcile only
 * woken, no write spent on it.
 */
import { describe, expect, it, vi } from 'vitest';
import { openAIDeliveries } from '../../app/http/routes/provider-webhooks.ts';
import { receiveWebhook } from '../../app/http/webhook.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { parseSigningSecrets } from '../../app/signing-secrets.ts';
import { newSecret } from '../support/deliveries.ts';
import { openaiDelivery } from '../support/fake-openai.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { silentLogger } from '../support/silent-logger.ts';

describe('the poll a bare end asks for', () => {
  it('wakes reconcile for a job the delivery made, and makes a known job due now', async () => {
    const secret = newSecret();
    const store = new MemoryStore();
    const pollNow = vi.fn(async () => 'scheduled' as const);
    const wakeReconcile = vi.fn(async () => {});
    const receive = receiveWebhook({
      store,
      logger: silentLogger,
      verifier: new WebhookSignatureVerifier(async () => parseSigningSecrets(secret)),
      map: openAIDeliveries({}),
      pollNow,
      wakeReconcile,
    });
    const send = async (type: string, id: string) => {
      const { body, headers } = openaiDelivery(secret, { type, id });
      return receive(body, new Headers(headers));
    };
    expect((await send('batch.completed', 'batch_new')).body).toMatchObject({
      applied: true,
      operation: { version: 1, resultPending: true },
    });
    expect(wakeReconcile).toHaveBeenCalledTimes(1);
    expect(pollNow).not.toHaveBeenCalled();
    // A response Ratchet knew before its end: made due now.
    await store.apply(
      { name: 'openai/responses/resp_known', kind: 'openai-response', state: 'RUNNING', providerState: 'in_progress', source: 'poll' },
      '2026-12-07T00:00:00.000000000Z',
    );
    expect((await send('response.completed', 'resp_known')).body).toMatchObject({ applied: true, operation: { version: 2 } });
    expect(pollNow).toHaveBeenCalledWith({ name: 'openai/responses/resp_known', kind: 'openai-response' });
    expect(wakeReconcile).toHaveBeenCalledTimes(1);
  });
});
