/**
 * The API's answer to a JWT-signed (dynamic) delivery: the body is never
 * applied, the operation is polled instead; the local schedule's extra run;
 * the webhook health check's failures.
 */
import { describe, expect, it, vi } from 'vitest';
import { createApp } from '../../app/http/app.ts';
import { WebhookKeySet } from '../../app/http/webhook-keys.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { WebhookHealth } from '../../app/reconcile/webhook-health.ts';
import { LocalSchedule } from '../../app/schedule.ts';
import { envelope } from '../support/deliveries.ts';
import { GOOGLE_ISSUER, jwtDelivery, rsaKey } from '../support/google-keys.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { silentLogger } from '../support/silent-logger.ts';

const AUDIENCE = 'ratchet-test';
const rsa = rsaKey();
const keys = new WebhookKeySet('http://keys.test/jwks.json', {
  fetch: (async () => Response.json({ keys: [rsa.publicJwk] })) as unknown as typeof fetch,
});

function appWith(pollNow?: Parameters<typeof createApp>[0]['pollNow'], jwtPollsPerMinute?: number) {
  const store = new MemoryStore();
  const verifier = new WebhookSignatureVerifier(async () => [], { keys, audience: AUDIENCE, issuer: GOOGLE_ISSUER });
  return { store, app: createApp({ store, verifier, logger: silentLogger, pollNow, ...(jwtPollsPerMinute && { jwtPollsPerMinute }) }) };
}

async function deliverJwt(app: ReturnType<typeof createApp>, payload: unknown) {
  const { body, headers } = await jwtDelivery(rsa, payload, { audience: AUDIENCE });
  const response = await app.request('/webhooks/gemini', { method: 'POST', body, headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe('a JWT-signed delivery', () => {
  it('asks for a poll of the operation its body names, and writes nothing from the body', async () => {
    const asked: unknown[] = [];
    const { app, store } = appWith(async (operation) => {
      asked.push(operation);
      return 'scheduled';
    });
    expect(await deliverJwt(app, envelope('batch.succeeded', { id: 'batch_77' }))).toEqual({
      status: 200,
      body: { applied: false, reason: 'verifying-by-poll' },
    });
    expect(asked).toEqual([{ name: 'batches/77', kind: 'batch' }]);
    expect(store.records.size).toBe(0);
  });

  it('is 200 unprocessable when its body names no valid operation, and 200 unknown-event-type for a ping: nothing polled', async () => {
    const asked = vi.fn(async () => 'scheduled' as const);
    const { app } = appWith(asked);
    expect(await deliverJwt(app, envelope('batch.succeeded', { id: 'batches/../files/x' }))).toMatchObject({
      status: 200,
      body: { reason: 'unprocessable' },
    });
    expect(await deliverJwt(app, { type: 'ping' })).toMatchObject({ status: 200, body: { reason: 'unknown-event-type' } });
    expect(asked).not.toHaveBeenCalled();
  });

  it('is 503 (Gemini retries) when nothing can poll here, or the poll could not be asked for', async () => {
    const payload = envelope('batch.succeeded', { id: 'batches/78' });
    expect(await deliverJwt(appWith().app, payload)).toMatchObject({ status: 503, body: { error: 'not-configured' } });
    const failing = appWith(async () => {
      throw new Error('store unavailable');
    });
    expect(await deliverJwt(failing.app, payload)).toMatchObject({ status: 503, body: { error: 'not-recorded' } });
  });
});

describe('what one JWT can make Ratchet do', () => {
  it('one token asks about one operation: its retry passes, the same token over another body is 401 and polls nothing', async () => {
    const asked: string[] = [];
    const { app } = appWith(async (operation) => {
      asked.push(operation.name);
      return 'scheduled';
    });
    const captured = await jwtDelivery(rsa, envelope('batch.succeeded', { id: 'batches/mine' }), { audience: AUDIENCE });
    const send = (body: string) => app.request('/webhooks/gemini', { method: 'POST', body, headers: captured.headers });
    expect((await send(captured.body)).status).toBe(200);
    expect((await send(captured.body)).status).toBe(200); // Gemini's retry of the same delivery
    for (const other of ['batches/theirs-1', 'batches/theirs-2', 'batches/theirs-3']) {
      const forged = captured.body.replace('batches/mine', other);
      const response = await send(forged);
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({ error: 'invalid-signature', message: expect.stringMatching(/another operation/) });
    }
    expect(asked).toEqual(['batches/mine', 'batches/mine']);
  });

  it('JWT-only deliveries together ask at most jwtPollsPerMinute polls: then 429 with Retry-After', async () => {
    const asked = vi.fn(async () => 'scheduled' as const);
    const { app } = appWith(asked, 2);
    for (const id of ['batches/r1', 'batches/r2']) expect((await deliverJwt(app, envelope('batch.succeeded', { id }))).status).toBe(200);
    const { body, headers } = await jwtDelivery(rsa, envelope('batch.succeeded', { id: 'batches/r3' }), { audience: AUDIENCE });
    const refused = await app.request('/webhooks/gemini', { method: 'POST', body, headers });
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toMatchObject({ error: 'rate-limited' });
    expect(asked).toHaveBeenCalledTimes(2);
  });
});

describe('LocalSchedule.runSoon', () => {
  it('runs at once when idle, and once more right after a run under way, never two at once', async () => {
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    let release: () => void = () => {};
    const schedule = new LocalSchedule(
      3_600_000,
      async () => {
        runs++;
        running++;
        maxRunning = Math.max(maxRunning, running);
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        running--;
      },
      silentLogger,
    );
    schedule.start(); // the first run, held
    expect(runs).toBe(1);
    schedule.runSoon();
    schedule.runSoon(); // folded into one extra run
    release();
    await vi.waitFor(() => expect(runs).toBe(2));
    release();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs).toBe(2);
    schedule.runSoon(); // idle: at once, not after the hour
    await vi.waitFor(() => expect(runs).toBe(3));
    release();
    await schedule.stop();
    expect(maxRunning).toBe(1);
  });
});

describe('WebhookHealth', () => {
  it('never throws: a failed list is logged, the last count kept, and tried again after five minutes', async () => {
    let now = 0;
    let fail = false;
    const list = vi.fn(async () => {
      if (fail) throw new Error('Gemini answered 500');
      return { webhooks: [{ id: 'wh_1', uri: 'https://me.example/webhooks/gemini', state: 'disabled_due_to_failed_deliveries' }] };
    });
    const health = new WebhookHealth({ webhooks: { list }, logger: silentLogger, clock: () => now });
    expect(await health.disabledWebhooks()).toBe(1);
    fail = true;
    now += 61 * 60_000;
    expect(await health.disabledWebhooks()).toBe(1);
    now += 60_000;
    expect(await health.disabledWebhooks()).toBe(1);
    expect(list).toHaveBeenCalledTimes(2);
    fail = false;
    now += 5 * 60_000;
    expect(await health.disabledWebhooks()).toBe(1);
    expect(list).toHaveBeenCalledTimes(3);
  });

  it('follows next_page_token until the last page', async () => {
    const pages: Record<string, { webhooks: Array<{ id: string; uri: string; state: string }>; next_page_token?: string }> = {
      '': { webhooks: [{ id: 'a', uri: 'u', state: 'enabled' }], next_page_token: 'p2' },
      p2: { webhooks: [{ id: 'b', uri: 'u', state: 'disabled_due_to_failed_deliveries' }], next_page_token: '' },
    };
    const health = new WebhookHealth({
      webhooks: { list: async (params) => pages[params?.page_token ?? ''] ?? { webhooks: [] } },
      logger: silentLogger,
    });
    expect(await health.disabledWebhooks()).toBe(1);
  });
});
