/**
 * GET /operations and the polling status, through the HTTP app on each
 * engine's store (the list is the whole store's: a store of its own).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../app/http/app.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { trackedRecord } from '../../core/reducer.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { ENGINES, type FullStore, type StoreUnderTest } from '../support/engines.ts';
import { silentLogger } from '../support/silent-logger.ts';

describe.each(ENGINES)('on $label', (engine) => {
  const secret = newSecret();
  let clock = new Date('2026-12-01T00:00:00Z');
  let subject: StoreUnderTest;
  let store: FullStore;
  let app: ReturnType<typeof createApp>;

  async function deliver(type: string, id: string) {
    clock = new Date(clock.getTime() + 1_000);
    const { body, headers } = signedDelivery(secret, envelope(type, { id }, clock.toISOString()));
    expect((await app.request('/webhooks/gemini', { method: 'POST', body, headers })).status).toBe(200);
  }
  const list = async (query = '') => {
    const response = await app.request(`/operations${query}`);
    return {
      status: response.status,
      body: (await response.json()) as { operations: Array<{ name: string }>; nextCursor?: string; error?: string },
    };
  };

  beforeAll(async () => {
    subject = await engine.open('list');
    store = subject.store;
    app = createApp({
      store,
      queries: store,
      receipts: store,
      verifier: new WebhookSignatureVerifier(async () => [secret]),
      logger: silentLogger,
      clock: () => clock,
    });
    // Recorded in this order, one second apart: b0 … b4 succeeded, i0 i1 waiting, then b1 again (stale: not a write).
    for (let i = 0; i < 5; i++) await deliver('batch.succeeded', `batches/b${i}`);
    await deliver('interaction.requires_action', 'interactions/i0');
    await deliver('interaction.requires_action', 'interactions/i1');
    // A tracked video, written with the clock too.
    clock = new Date(clock.getTime() + 1_000);
    await store.write(trackedRecord('models/veo/operations/v0', 'video', clock.toISOString().replace('Z', '000000Z')), undefined);
    // Gemini's ping: a note in the store that is not an operation.
    const { body, headers } = signedDelivery(secret, { type: 'ping' });
    await app.request('/webhooks/gemini', { method: 'POST', body, headers });
  });
  afterAll(() => subject.close());

  describe('GET /operations', () => {
    it('lists every operation, most recently recorded first, and nothing that is not one', async () => {
      const { status, body } = await list();
      expect(status).toBe(200);
      expect(body.operations.map((o) => o.name)).toEqual([
        'models/veo/operations/v0',
        'interactions/i1',
        'interactions/i0',
        'batches/b4',
        'batches/b3',
        'batches/b2',
        'batches/b1',
        'batches/b0',
      ]);
      expect(body.nextCursor).toBeUndefined();
    });

    it('filters by state and by kind, together too', async () => {
      expect((await list('?state=REQUIRES_ACTION')).body.operations.map((o) => o.name)).toEqual(['interactions/i1', 'interactions/i0']);
      expect((await list('?kind=video')).body.operations.map((o) => o.name)).toEqual(['models/veo/operations/v0']);
      expect((await list('?kind=batch&state=SUCCEEDED&limit=2')).body.operations.map((o) => o.name)).toEqual(['batches/b4', 'batches/b3']);
      expect((await list('?kind=interaction&state=SUCCEEDED')).body.operations).toEqual([]);
    });

    it('pages with limit and cursor: every operation once, in order', async () => {
      const seen: string[] = [];
      let query = '?limit=3';
      for (let page = 0; page < 5; page++) {
        const { body } = await list(query);
        seen.push(...body.operations.map((o) => o.name));
        if (!body.nextCursor) break;
        query = `?limit=3&cursor=${body.nextCursor}`;
      }
      expect(seen).toEqual((await list()).body.operations.map((o) => o.name));
      // A filtered page is full even when the filter skips items.
      const first = await list('?state=SUCCEEDED&limit=2');
      const second = await list(`?state=SUCCEEDED&limit=2&cursor=${first.body.nextCursor}`);
      expect(second.body.operations.map((o) => o.name)).toEqual(['batches/b2', 'batches/b1']);
    });

    it('answers 400 for a bad state, kind, limit or cursor', async () => {
      for (const query of [
        '?state=DONE',
        '?kind=file',
        '?limit=0',
        '?limit=101',
        '?limit=1.5',
        '?cursor=nope',
        `?cursor=${Buffer.from('{"name":"x"}').toString('base64url')}`,
      ]) {
        const { status, body } = await list(query);
        expect({ query, status, error: body.error }).toEqual({ query, status: 400, error: 'malformed-request' });
      }
    });
  });

  type View = { recordedAt: string; polling: Record<string, unknown> };
  const describe_ = async (name: string) => (await (await app.request(`/operations/${name}`)).json()) as View;

  describe('the polling status', () => {
    it('shows when an open operation is polled next, and why polling stopped', async () => {
      const open = await describe_('models/veo/operations/v0');
      expect(open.polling).toEqual({ nextPollAt: open.recordedAt, failedPolls: 0, notFoundPolls: 0, note: null });
      const done = await describe_('batches/b0');
      expect(done.polling).toMatchObject({ nextPollAt: null });
      await store.schedulePoll('interactions/i0', 1, {
        unchangedPolls: 0,
        failedPolls: 0,
        notFoundPolls: 3,
        nextPollAt: null,
        note: 'not-found',
      });
      const stopped = await describe_('interactions/i0');
      expect(stopped.polling).toEqual({ nextPollAt: null, failedPolls: 0, notFoundPolls: 3, note: 'not-found' });
      expect((await list('?kind=interaction')).body.operations.find((o) => o.name === 'interactions/i0')).toMatchObject({
        polling: { note: 'not-found' },
      });
    });
  });
});
