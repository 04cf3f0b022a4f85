/**
 * Guarantee 6 as amended: `npm start` answers every authentic delivery 200,
 * whatever it holds, because Gemini retries every other answer for a day and
 * then switches the webhook off. What can never be used changes nothing, is
 * kept with its reason (`GET /decisions?outcome=unprocessable`, the console)
 * and counted; only what is not authentic is 401.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';

const secret = newSecret();
let ratchet: RatchetProcess;

beforeAll(async () => {
  ratchet = await startRatchet({ DATA_DIR: ':memory:', WEBHOOK_SIGNING_SECRETS: secret });
});
afterAll(async () => {
  await ratchet?.stop();
});

async function deliver(payload: unknown, id: string, options: { secret?: string; tamper?: boolean } = {}) {
  const signed = signedDelivery(options.secret ?? secret, payload, { id });
  const body = options.tamper ? signed.body.replace('batch_', 'batch-') : signed.body;
  const response = await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers: signed.headers });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

interface Listed {
  decisions: Array<{ webhookId: string; reason: string; type: string | null; body: string; detail: string }>;
  nextCursor?: string;
}
const listed = async (query = '') => (await (await ratchet.api(`/decisions?outcome=unprocessable${query}`)).json()) as Listed;

describe('authentic deliveries Ratchet cannot use', () => {
  const cases = [
    ['not-json', 'a body that is not JSON', '{"type":"batch.succeeded","data":'],
    ['invalid-name', 'a name with a non-ASCII letter', envelope('batch.succeeded', { id: 'batches/naïve' })],
    ['invalid-name', 'a name with a .. segment', envelope('interaction.failed', { id: 'interactions/../batches/1' })],
    ['invalid-time', 'a time that does not parse', envelope('batch.failed', { id: 'batch_t1' }, 'yesterday')],
    ['malformed-event', 'a known type without data.id', envelope('video.generated', {})],
  ] as const;

  it.each(cases)('%s, %s: 200, nothing stored, listed with its reason', async (reason, _, payload) => {
    const id = `msg_${reason}_${Math.random().toString(36).slice(2)}`;
    expect(await deliver(payload, id)).toEqual({
      status: 200,
      body: { applied: false, reason: 'unprocessable', detail: expect.any(String) },
    });
    const kept = (await listed()).decisions.find((d) => d.webhookId === id);
    expect(kept).toMatchObject({ reason, body: typeof payload === 'string' ? payload : JSON.stringify(payload) });
    const operations = (await (await ratchet.api('/operations')).json()) as { operations: unknown[] };
    expect(operations.operations).toEqual([]);
  });

  it('a tampered or foreign-signed delivery is still 401, and is not kept', async () => {
    expect((await deliver(envelope('batch.succeeded', { id: 'batch_x1' }), 'msg_tampered', { tamper: true })).status).toBe(401);
    expect((await deliver('{"type":', 'msg_foreign', { secret: newSecret() })).status).toBe(401);
    expect((await listed()).decisions.map((d) => d.webhookId)).not.toEqual(expect.arrayContaining(['msg_tampered', 'msg_foreign']));
  });

  it('lists newest first in pages, behind the token; a redelivery of one webhook-id is kept once', async () => {
    await deliver('not json at all', 'msg_again');
    await deliver('not json at all', 'msg_again');
    const all = await listed();
    expect(all.decisions[0]?.webhookId).toBe('msg_again');
    expect(all.decisions.filter((d) => d.webhookId === 'msg_again')).toHaveLength(1);
    const first = await listed('&limit=2');
    expect(first.decisions).toHaveLength(2);
    const second = await listed(`&limit=2&cursor=${first.nextCursor}`);
    expect(second.decisions[0]?.webhookId).toBe(all.decisions[2]?.webhookId);
    expect((await fetch(`${ratchet.url}/decisions?outcome=unprocessable`)).status).toBe(401);
    expect((await ratchet.api('/decisions?outcome=applied')).status).toBe(400);
  });

  it('the console flags them on the list and shows each with its reason and body', async () => {
    const list = await (await ratchet.api('/')).text();
    expect(list).toMatch(/id="unprocessable-note"[\s\S]*unprocessable\s+deliveries/);
    const page = await (await ratchet.api('/console/unprocessable')).text();
    expect(page).toContain('msg_again');
    expect(page).toContain('invalid-time');
    expect(page).toContain('naïve');
  });

  it('reads any envelope version, and a video.generated that names an interaction as that interaction', async () => {
    expect(await deliver({ ...envelope('batch.succeeded', { id: 'batch_v9' }), version: 'v9' }, 'msg_v9')).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name: 'batches/v9', state: 'SUCCEEDED' } },
    });
    expect(await deliver(envelope('video.generated', { id: 'interactions/v1_omni', video_uri: 'files/clip' }), 'msg_omni')).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name: 'interactions/v1_omni', kind: 'interaction', result: { outputUri: 'files/clip' } } },
    });
  });
});
