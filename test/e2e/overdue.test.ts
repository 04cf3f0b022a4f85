/**
 * Overdue jobs end to end: `npm start` with a short OVERDUE_AFTER, the fake
 * Gemini answering a job that stays running, and the outbound webhook's
 * receiver. One `operation.overdue` effect, signed and verified by the
 * receiver package, in version order between the job's state changes; the job
 * listed by `GET /operations?overdue=true` and flagged in the console while
 * open; then it ends and the terminal change follows (a malformed
 * OVERDUE_AFTER is refused at start: bad-config.test.ts).
 *
 * Found at its limit whatever the poll schedule, on SQLite and PostgreSQL,
 * reconcile at its default pace (a round a minute): a job whose next poll is
 * half an hour away, and one whose polling stopped, each get their
 * `operation.overdue` effect within 65 s of a 5 s limit, and are listed and
 * flagged.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { OperationStore, PollSchedule } from '../../app/ports.ts';
import { type OperationRecord, trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import { openPostgresEngine } from '../../engines/postgres/index.ts';
import { openSqliteEngine } from '../../engines/sqlite/index.ts';
import { newSecret } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

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

/**
 * Two running interactions, tracked now and stored before Ratchet starts (through the engine's own store): one polled
 * last and due again in half an hour, one whose polling stopped (Gemini said 404 three times). Neither is due for a
 * poll before its 5 s limit is long past.
 */
async function seed(store: OperationStore & PollSchedule, suffix: string): Promise<{ names: [string, string]; openSince: number }> {
  const names: [string, string] = [`interactions/half-hour-${suffix}`, `interactions/stopped-${suffix}`];
  const openSince = Date.now();
  const halfHour = timeFromDate(new Date(openSince + 30 * 60_000));
  for (const [i, name] of names.entries()) {
    const record: OperationRecord = {
      ...trackedRecord(name, 'interaction', timeFromDate(new Date(openSince))),
      state: 'RUNNING',
      providerState: 'in_progress',
      source: 'poll',
    };
    expect((await store.write(record, undefined)).ok).toBe(true);
    const stopped = i === 1;
    expect(
      await store.schedulePoll(name, 1, {
        nextPollAt: stopped ? null : halfHour,
        unchangedPolls: 5,
        failedPolls: 0,
        notFoundPolls: stopped ? 3 : 0,
        ...(stopped && { note: 'not-found' }),
      }),
    ).toBe(true);
  }
  return { names, openSince };
}

const HOMES = [
  {
    label: 'SQLite',
    prepare: async (suffix: string) => {
      const folder = mkdtempSync(join(tmpdir(), 'ratchet-overdue-limit-'));
      const engine = openSqliteEngine({ dataDir: folder, historyRetentionDays: 30, logger: silentLogger });
      const seeded = await seed(engine.store, suffix);
      engine.data.close();
      return { ...seeded, env: { DATA_DIR: folder }, cleanup: () => rmSync(folder, { recursive: true, force: true }) };
    },
  },
  {
    label: 'PostgreSQL',
    prepare: async (suffix: string) => {
      const url = inject('postgresUrl');
      const schema = `overdue_${suffix}_${Date.now().toString(36)}`;
      const engine = await openPostgresEngine({ url, schema, historyRetentionDays: 30 });
      const seeded = await seed(engine.store, suffix);
      await engine.close();
      return {
        ...seeded,
        env: { DATABASE_URL: url, DATABASE_SCHEMA: schema },
        cleanup: async () => {
          const dropper = await openPostgresEngine({ url, schema, historyRetentionDays: 30 });
          await dropper.db.run('DROP SCHEMA {s} CASCADE');
          await dropper.close();
        },
      };
    },
  },
];

describe.concurrent('overdue at its limit, whatever the poll schedule', () => {
  for (const home of HOMES)
    it(`on ${home.label}: a job polled half an hour apart and one whose polling stopped, each marked within 65 s of a 5 s limit`, async () => {
      const suffix = home.label.toLowerCase();
      const seeded = await home.prepare(suffix);
      const limitAt = seeded.openSince + 5_000;
      const [halfHour, stopped] = seeded.names;
      gemini.interactions.set(halfHour, { status: 'in_progress', updated: '2026-12-06T09:00:00Z' });
      const server = await startRatchet({
        ...seeded.env,
        GEMINI_API_KEY: 'overdue-key',
        GEMINI_BASE_URL: gemini.baseUrl,
        RECONCILE_INTERVAL_SECONDS: '60',
        OVERDUE_AFTER: 'interaction=5s',
        EFFECTS_WEBHOOK_URL: receiver.url,
        EFFECTS_SIGNING_SECRET: outbound,
      });
      try {
        const overdueEffect = (name: string) =>
          receiver.applied().find((d) => d.body.data.name === name && d.body.type === 'operation.overdue');
        await eventually(() => Boolean(overdueEffect(halfHour) && overdueEffect(stopped)), 75_000, 'both overdue effects');
        const markedAt = (name: string) =>
          (overdueEffect(name)?.body.data as unknown as { overdue: { at: string } } | undefined)?.overdue.at ?? '';
        const markedAfterLimitMs = Math.max(...seeded.names.map((name) => Date.parse(markedAt(name)) - limitAt));
        console.log(`${home.label}: marked ${(markedAfterLimitMs / 1000).toFixed(1)} s after the limit`);
        expect(markedAfterLimitMs).toBeGreaterThanOrEqual(0);
        expect(markedAfterLimitMs).toBeLessThan(65_000);
        // Neither was polled to be found: the half-hour one is not due, the other no longer polled.
        expect(gemini.requests.filter((r) => r.includes(halfHour) || r.includes(stopped))).toEqual([]);
        type Listed = { operations: Array<{ name: string; polling: { nextPollAt: string | null; note: string | null } }> };
        const listed = (await (await server.api('/operations?overdue=true')).json()) as Listed;
        expect(listed.operations.map((o) => o.name).sort()).toEqual([...seeded.names].sort());
        expect(listed.operations.find((o) => o.name === stopped)?.polling).toMatchObject({ nextPollAt: null, note: 'not-found' });
        const filtered = await (await server.api('/?overdue=true')).text();
        for (const name of seeded.names) expect(filtered).toContain(`data-name="${name}"`);
      } finally {
        await server.stop();
        await seeded.cleanup();
      }
      // Ratchet's start, a minute's round, the effect's delivery: the bound itself is the assertion above.
    }, 120_000);
});
