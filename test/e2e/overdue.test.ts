/**
 * Overdue jobs end to end: `npm start` with a short OVERDUE_AFTER, the fake
 * Gemini answering a job that stays running, and the outbound webhook's
 * receiver. One `operation.overdue` effect, signed and verified by the
 * receiver package, in version order between the job's state changes; the job
 * listed by `GET /operations?overdue=true` and flagged in the console while
 * open; then it ends and the terminal change follows (a malformed
 * OVERDUE_AFTER is refused at start: bad-config.test.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSecret } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const outbound = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-overdue-'));
let gemini: FakeGemini;
let receiver: Receiver;
let ratchet: RatchetProcess;

beforeAll(async () => {
  gemini = await new FakeGemini('overdue-key').start();
  receiver = await new Receiver(outbound).start();
  ratchet = await startRatchet({
    DATA_DIR: dataDir,
    GEMINI_API_KEY: 'overdue-key',
    GEMINI_BASE_URL: gemini.baseUrl,
    RECONCILE_INTERVAL_SECONDS: '1',
    OVERDUE_AFTER: 'interaction=3s,batch=off',
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
  });
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  await gemini?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('overdue jobs', () => {
  it('sends one operation.overdue effect in order, lists and flags the job while open, then its end follows', async () => {
    const name = 'interactions/slow-research';
    const batch = 'batches/never-late';
    // Tracked first: a batch Gemini lists before it is tracked is adopted by discovery (then the track answers 200).
    for (const job of [name, batch]) {
      const tracked = await ratchet.api('/operations', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: job }),
      });
      expect(tracked.status).toBe(201);
    }
    gemini.interactions.set(name, { status: 'in_progress', updated: '2026-12-06T09:00:00Z' });
    gemini.batches.set(batch, { state: 'BATCH_STATE_RUNNING', updateTime: '2026-12-06T09:00:00Z' });
    const of = (job: string) => receiver.applied().filter((d) => d.body.data.name === job);
    await eventually(() => of(name).some((d) => d.body.type === 'operation.overdue'), 20_000, 'the overdue effect');

    type Listed = { operations: Array<{ name: string }> };
    const listed = (await (await ratchet.api('/operations?overdue=true')).json()) as Listed;
    expect(listed.operations.map((o: { name: string }) => o.name)).toEqual([name]);
    expect(listed.operations[0]).toMatchObject({ state: 'RUNNING', overdue: { afterSeconds: 3 } });
    const page = await (await ratchet.api('/')).text();
    expect(page).toMatch(/data-filter="overdue"/);
    expect(page).toMatch(/class="retrying overdue"/);
    const filtered = await (await ratchet.api('/?overdue=true')).text();
    expect(filtered).toContain(`data-name="${name}"`);
    expect(filtered).not.toContain(`data-name="${batch}"`);

    // Polled on for a while more: no second overdue effect.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    gemini.interactions.set(name, { status: 'completed', updated: '2026-12-06T09:30:00Z' });
    await eventually(() => of(name).some((d) => d.body.data.state === 'SUCCEEDED'), 20_000, 'the terminal effect');
    expect(of(name).map((d) => [d.body.type, d.body.data.version, d.body.data.state])).toEqual([
      ['operation.state_changed', 2, 'RUNNING'],
      ['operation.overdue', 3, 'RUNNING'],
      ['operation.state_changed', 4, 'SUCCEEDED'],
    ]);
    expect(of(name).every((d) => d.signatureValid)).toBe(true);
    const overdue = of(name)[1]?.body as unknown as { data: { overdue: Record<string, unknown> } };
    expect(overdue.data.overdue).toEqual({ at: expect.any(String), afterSeconds: 3, openSince: expect.any(String) });
    // Off for batches: never marked, however long it stays open.
    expect(of(batch).map((d) => d.body.type)).toEqual(['operation.state_changed']);
    expect(((await (await ratchet.api('/operations?overdue=true')).json()) as Listed).operations).toEqual([]);
    // History keeps the mark as a write of its own.
    const history = (await (await ratchet.api(`/operations/${name}/history`)).json()) as {
      history: Array<{ version: number; source: string }>;
    };
    expect(history.history.map((h: { version: number; source: string }) => [h.version, h.source])).toEqual([
      [1, 'track'],
      [2, 'poll'],
      [3, 'overdue'],
      [4, 'poll'],
    ]);
  });
});
