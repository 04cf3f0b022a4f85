/**
 * The embedded engine under the runtime's own HTTP API, in this process: the
 * reducer's guarantees held by concurrent signed deliveries over real HTTP,
 * and a file that cannot be written (full, read-only) answered 503 — never
 * 200 without a write, never 500 — until it can be again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { createApp } from '../../app/http/app.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { openDataFolder } from '../../engines/sqlite/data-folder.ts';
import { writeProbe } from '../../engines/sqlite/health.ts';
import { SqliteOperationStore } from '../../engines/sqlite/operation-store.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { formatTime, normalisedForm } from '../support/histories.ts';
import { apiOf } from '../support/ratchet-process.ts';
import { shuffle } from '../support/shuffle.ts';
import { silentLogger } from '../support/silent-logger.ts';

const TERMINAL_TYPES = { completed: 'SUCCEEDED', failed: 'FAILED', cancelled: 'CANCELLED' } as const;
const BASE = 1_780_000_000n * 1_000_000_000n;
const ascending = (times: bigint[]) => [...times].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

/** One interaction's webhooks: requires_action at some times, maybe one kind of end at some later times. */
const interactionArb = fc
  .record({
    waits: fc.uniqueArray(fc.bigInt({ min: 0n, max: 10n ** 12n }), { maxLength: 3 }).map(ascending),
    end: fc.option(
      fc.record({
        type: fc.constantFrom(...(Object.keys(TERMINAL_TYPES) as Array<keyof typeof TERMINAL_TYPES>)),
        times: fc.uniqueArray(fc.bigInt({ min: 10n ** 12n + 1n, max: 10n ** 13n }), { minLength: 1, maxLength: 2 }).map(ascending),
      }),
      { nil: undefined },
    ),
    copies: fc.integer({ min: 1, max: 3 }),
    digits: fc.constantFrom(0 as const, 3 as const, 6 as const, 9 as const),
    offset: fc.constantFrom(0, 60, -330),
  })
  .filter((i) => i.waits.length > 0 || i.end !== undefined);

/** A runtime of its own for the enclosing describe, on a fresh data folder: read `.url` inside its tests. */
function runtimeFor(secret: string): { readonly url: string; readonly apiToken: string } {
  const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-sqlite-runtime-'));
  let runtime: LocalRuntime;
  beforeAll(async () => {
    runtime = await startLocalRuntime(loadConfig({ DATA_DIR: dataDir, PORT: '0', WEBHOOK_SIGNING_SECRETS: secret }));
  });
  afterAll(async () => {
    await runtime.stop();
    rmSync(dataDir, { recursive: true, force: true });
  });
  return {
    get url() {
      return runtime.url;
    },
    get apiToken() {
      return runtime.apiToken;
    },
  };
}

describe('the embedded engine behind its HTTP API', () => {
  const secret = newSecret();
  const runtime = runtimeFor(secret);

  it('concurrent shuffled, duplicated signed deliveries end every operation at its maximum, with no more versions than distinct events', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer(), fc.array(interactionArb, { minLength: 5, maxLength: 15 }), async (seed, interactions) => {
        run++;
        const deliveries: Array<{ body: string; headers: Record<string, string> }> = [];
        const expected = new Map<string, { state: string; updateTime: string; versions: number }>();
        interactions.forEach((interaction, i) => {
          const name = `interactions/h-${run}-${i}`;
          const at = (t: bigint) => formatTime(BASE + t * 1_000n, interaction.digits, interaction.offset);
          const events = [
            ...interaction.waits.map((t) => ({ type: 'interaction.requires_action', t })),
            ...(interaction.end?.times ?? []).map((t) => ({ type: `interaction.${interaction.end?.type}`, t })),
          ];
          events.forEach((event, e) => {
            const delivery = signedDelivery(secret, envelope(event.type, { id: name, update_time: at(event.t) }), { id: `${name}:${e}` });
            for (let c = 0; c < interaction.copies; c++) deliveries.push(delivery);
          });
          const last = events.at(-1) as (typeof events)[number];
          const end = interaction.end && TERMINAL_TYPES[interaction.end.type];
          // Events are listed in time order (requires_action, then the end): the maximum is the last.
          // What the written time says exactly: the instant cut to the digits it was written with.
          const exact = (t: bigint) => {
            const nanos = BASE + t * 1_000n;
            return normalisedForm(nanos - (nanos % 10n ** BigInt(9 - interaction.digits)));
          };
          expected.set(name, { state: end ?? 'REQUIRES_ACTION', updateTime: exact(last.t), versions: events.length });
        });
        let next = 0;
        const order = shuffle(deliveries, seed);
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            while (next < order.length) {
              const delivery = order[next++] as (typeof order)[number];
              const response = await fetch(`${runtime.url}/webhooks/gemini`, { method: 'POST', ...delivery });
              expect(response.status).toBe(200);
            }
          }),
        );
        for (const [name, want] of expected) {
          const record = (await (await apiOf(runtime)(`/operations/${name}`)).json()) as {
            state: string;
            updateTime: string;
            version: number;
          };
          expect({ name, state: record.state, updateTime: record.updateTime }).toEqual({
            name,
            state: want.state,
            updateTime: want.updateTime,
          });
          expect(record.version).toBeLessThanOrEqual(want.versions);
        }
      }),
      { numRuns: 6, endOnFailure: true },
    );
  });
});

describe('the decisions log', () => {
  const secret = newSecret();
  const runtime = runtimeFor(secret);
  type Decisions = {
    name: string;
    decisions: Array<{ eventId: string; verdict: string; version?: number; reason?: string; scheme?: string; source: string }>;
  };
  const decisionsOf = async (name: string) => {
    const response = await apiOf(runtime)(`/operations/${name}/decisions`);
    return { status: response.status, body: (await response.json()) as Decisions };
  };
  const post = (delivery: { body: string; headers: Record<string, string> }) =>
    fetch(`${runtime.url}/webhooks/gemini`, { method: 'POST', ...delivery }).then(
      (r) => r.json() as Promise<{ applied: boolean; reason?: string }>,
    );

  it("accounts for every delivery of a shuffled, duplicated storm exactly once, with the reducer's reasons", async () => {
    const sent: Array<{ name: string; id: string; delivery: ReturnType<typeof signedDelivery> }> = [];
    for (let i = 0; i < 10; i++) {
      const name = `interactions/d-${i}`;
      const events = [
        envelope('interaction.requires_action', { id: name, update_time: '2026-11-30T10:00:01Z' }),
        envelope('interaction.requires_action', { id: name, update_time: '2026-11-30T10:00:02Z' }),
        envelope('interaction.completed', { id: name, update_time: '2026-11-30T10:00:03Z' }),
        envelope('interaction.failed', { id: name, update_time: '2026-11-30T10:00:04Z' }),
      ];
      events.forEach((event, e) => {
        const delivery = signedDelivery(secret, event, { id: `${name}:${e}` });
        for (let copy = 0; copy < 1 + (e % 2); copy++) sent.push({ name, id: `${name}:${e}`, delivery });
      });
    }
    const answers = new Map<string, Array<{ applied: boolean; reason?: string }>>();
    let next = 0;
    const order = shuffle(sent, 7);
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (next < order.length) {
          const one = order[next++] as (typeof order)[number];
          const answer = await post(one.delivery);
          answers.set(one.name, [...(answers.get(one.name) ?? []), answer]);
        }
      }),
    );
    for (let i = 0; i < 10; i++) {
      const name = `interactions/d-${i}`;
      const { status, body } = await decisionsOf(name);
      expect(status).toBe(200);
      const received = sent.filter((s) => s.name === name);
      // Every delivery once: applied + discarded = received, the same ids.
      expect(body.decisions.map((d) => d.eventId).sort()).toEqual(received.map((s) => s.id).sort());
      const applied = body.decisions.filter((d) => d.verdict === 'applied');
      const record = (await (await apiOf(runtime)(`/operations/${name}`)).json()) as { version: number };
      expect(applied.map((d) => d.version)).toEqual(Array.from({ length: record.version }, (_, v) => v + 1));
      // The reasons are the ones the sender was told.
      const told = (answers.get(name) ?? [])
        .filter((a) => !a.applied)
        .map((a) => a.reason)
        .sort();
      expect(
        body.decisions
          .filter((d) => d.verdict === 'discarded')
          .map((d) => d.reason)
          .sort(),
      ).toEqual(told);
      expect(body.decisions.every((d) => d.source === 'webhook' && d.scheme === 'hmac')).toBe(true);
    }
  });

  it('keeps the last 200 of an operation, answers 404 for an unknown one and 400 for a name that is not one', async () => {
    const name = 'interactions/d-many';
    for (let i = 0; i < 210; i++) {
      const time = new Date(Date.UTC(2026, 10, 30, 10, 0, i)).toISOString();
      await post(signedDelivery(secret, envelope('interaction.requires_action', { id: name, update_time: time }), { id: `many-${i}` }));
    }
    const { body } = await decisionsOf(name);
    expect(body.decisions).toHaveLength(200);
    expect(body.decisions[0]?.eventId).toBe('many-10');
    expect(body.decisions.at(-1)?.eventId).toBe('many-209');
    expect((await decisionsOf('interactions/never-seen')).status).toBe(404);
    expect((await decisionsOf('interactions/../x')).status).toBe(400);
  });
});

describe('a file that cannot be written', () => {
  const secret = newSecret();
  const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-sqlite-full-'));
  const data = openDataFolder(dataDir);
  const store = new SqliteOperationStore(data.db);
  const app = createApp({
    store,
    queries: store,
    verifier: new WebhookSignatureVerifier(async () => [secret]),
    logger: silentLogger,
    health: writeProbe(data.db),
  });
  afterAll(() => {
    data.close();
    rmSync(dataDir, { recursive: true, force: true });
  });
  const deliver = (id: string) =>
    app.request('/webhooks/gemini', { method: 'POST', ...signedDelivery(secret, envelope('batch.succeeded', { id })) });
  const healthz = async () => (await app.request('/healthz')).status;
  const settle = () => new Promise((resolve) => setTimeout(resolve, 1_100)); // the probe answers at most once a second

  it('answers 503 while the disk is full, stores nothing, and recovers', async () => {
    expect((await deliver('batches/before-full')).status).toBe(200);
    const pages = data.db.get<{ page_count: number }>('PRAGMA page_count')?.page_count as number;
    data.db.connection.exec(`PRAGMA max_page_count = ${pages}`); // what SQLITE_FULL looks like, without filling a disk
    let refused: string | undefined;
    for (let i = 0; i < 1_000 && !refused; i++) {
      const response = await deliver(`batches/fill-${i}`);
      if (response.status === 503) {
        expect(await response.json()).toMatchObject({ error: 'not-recorded' });
        refused = `batches/fill-${i}`;
      } else expect(response.status).toBe(200);
    }
    expect(refused).toBeDefined();
    await settle();
    expect(await healthz()).toBe(503);
    expect((await app.request(`/operations/${refused}`)).status).toBe(404);
    data.db.connection.exec('PRAGMA max_page_count = 1073741823');
    expect((await deliver(refused as string)).status).toBe(200);
    await settle();
    expect(await healthz()).toBe(200);
  });

  it('answers 503 while the file is read-only, and recovers', async () => {
    data.db.connection.exec('PRAGMA query_only = ON');
    expect((await deliver('batches/while-read-only')).status).toBe(503);
    await settle();
    expect(await healthz()).toBe(503);
    data.db.connection.exec('PRAGMA query_only = OFF');
    expect((await deliver('batches/while-read-only')).status).toBe(200);
    await settle();
    expect(await healthz()).toBe(200);
  });
});
