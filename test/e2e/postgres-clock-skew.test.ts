/**
 * Three `ratchet start` processes on one PostgreSQL schema whose clocks
 * disagree: one runs 30 s ahead and one 30 s behind (Debian's libfaketime as
 * an LD_PRELOAD), as a paused VM or a broken NTP leaves them. The receiver
 * takes a second per delivery, so claims are held while others look at them.
 * A storm of shuffled deliveries, each sent twice to any instance: every
 * effect is delivered once (no repeat, not even with its id), in version order
 * per operation; each hourly chore (discovery, the webhook health check) runs
 * once; a job is not marked overdue before its limit by the database's time.
 */
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';
import { shuffle } from '../support/shuffle.ts';

const LIBFAKETIME = '/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1';
const inbound = newSecret();
const outbound = newSecret();
const schema = `rt_skew_${Date.now().toString(36)}`;
const OPERATIONS = 40;
const OVERDUE_SECONDS = 20;
let receiver: Receiver;
let gemini: FakeGemini;
const instances: RatchetProcess[] = [];

/** An instance whose clock reads `skew` (libfaketime's `+30s`, `-30s`) off the real time; '' for a true clock. */
const start = (skew: string) =>
  startRatchet({
    DATABASE_URL: inject('postgresUrl'),
    DATABASE_SCHEMA: schema,
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    GEMINI_API_KEY: gemini.apiKey,
    GEMINI_BASE_URL: gemini.baseUrl,
    WEBHOOK_URL: 'https://ratchet.example/webhooks/gemini',
    RECONCILE_INTERVAL_SECONDS: '1',
    OVERDUE_AFTER: `interaction=${OVERDUE_SECONDS}s,batch=off`,
    ...(skew && { LD_PRELOAD: LIBFAKETIME, FAKETIME: skew, FAKETIME_DONT_RESET: '1' }),
  });

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  if (!existsSync(LIBFAKETIME)) throw new Error(`${LIBFAKETIME} is missing: apt-get install faketime (.ci/run installs it)`);
  receiver = await new Receiver(outbound).start();
  receiver.delayMs = 1_000;
  gemini = await new FakeGemini().start();
  // The true clock first (it migrates the new schema); the skewed two find it done.
  instances.push(await start(''));
  instances.push(...(await Promise.all([start('+30s'), start('-30s')])));
}, 120_000);
afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()));
  await receiver?.stop();
  await gemini?.stop();
});

describe('three PostgreSQL instances, one clock 30 s ahead and one 30 s behind', () => {
  it('agree on the time: the skewed instances read the database’s clock, not their own', async () => {
    // Each instance stamps a job it is asked to track with the time it agrees on (createdAt).
    const stamps: number[] = [];
    for (const [i, instance] of instances.entries()) {
      const name = `interactions/skew-stamp-${i}`;
      const before = Date.now();
      const response = await instance.api('/operations', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name }),
      });
      expect(response.status).toBe(201);
      const { createdAt } = (await response.json()) as { createdAt: string };
      stamps.push(Date.parse(createdAt) - before);
    }
    // Within a second of the real time on every instance, where their own clocks are 30 s apart.
    for (const offset of stamps) expect(Math.abs(offset)).toBeLessThan(1_000);
  });

  it('a storm over all three with a receiver taking a second a delivery: every effect once, in version order', {
    timeout: 180_000,
  }, async () => {
    const names = Array.from({ length: OPERATIONS }, (_, i) => `interactions/skew-${i}`);
    const events = names.flatMap((name) => [
      { id: `${name}:1`, payload: envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:01Z') },
      { id: `${name}:2`, payload: envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:02Z') },
      { id: `${name}:3`, payload: envelope('interaction.completed', { id: name }, '2026-11-30T10:00:03Z') },
    ]);
    // Every event twice, all shuffled: out of order, duplicated, to whichever instance.
    const sends = shuffle([...events, ...events], 56);
    let next = 0;
    await Promise.all(
      Array.from({ length: 6 }, async (_, worker) => {
        for (let turn = worker; next < sends.length; turn++) {
          const { id, payload } = sends[next++] as (typeof sends)[number];
          for (let attempt = 0; ; attempt++) {
            const { body, headers } = signedDelivery(inbound, payload, { id });
            const status = await fetch(`${(instances[(turn + attempt) % 3] as RatchetProcess).url}/webhooks/gemini`, {
              method: 'POST',
              body,
              headers,
            }).then((r) => r.status);
            if (status === 200) break;
            expect(status).toBe(503);
            await sleep(50);
          }
        }
      }),
    );
    // Each operation's state changes, as its history says (whichever order the events came in).
    const changes = new Map<string, string[]>();
    for (const name of names) {
      const { history } = (await (await (instances[0] as RatchetProcess).api(`/operations/${name}/history`)).json()) as {
        history: Array<{ version: number; stateChanged: boolean }>;
      };
      changes.set(
        name,
        history.filter((entry) => entry.stateChanged).map((entry) => `${name}#${entry.version}`),
      );
    }
    const expected = [...changes.values()].flat();
    await eventually(() => expected.every((id) => receiver.firstAcceptedAt.has(id)), 120_000, 'every effect delivered');
    // Longer than a lease (5 s) past the last: a claim taken over late would show now.
    await sleep(7_000);
    const arrived = receiver.accepted.filter((d) => names.includes(d.body.data.name)).map((d) => d.id);
    // Once each: not even a repeat with the same id.
    expect(arrived.length - new Set(arrived).size, 'deliveries repeated').toBe(0);
    expect(new Set(arrived)).toEqual(new Set(expected));
    for (const name of names)
      expect(
        arrived.filter((id) => id.startsWith(`${name}#`)),
        name,
      ).toEqual(changes.get(name));
  });

  it('runs each hourly chore once between them, and marks no job overdue before its limit', { timeout: 120_000 }, async () => {
    // Discovery lists batches, the webhook health check lists webhooks: once an hour, by whichever instance holds its lease.
    expect(gemini.requests.filter((path) => path === 'batches')).toHaveLength(1);
    expect(gemini.requests.filter((path) => path === 'webhooks')).toHaveLength(1);

    const name = 'interactions/skew-overdue';
    gemini.interactions.set(name, { status: 'in_progress', updated: '2026-11-30T10:00:00Z' });
    const tracked = await (instances[0] as RatchetProcess).api('/operations', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });
    expect(tracked.status).toBe(201);
    const trackedAt = Date.now();
    const overdueOf = async () =>
      ((await (await (instances[1] as RatchetProcess).api(`/operations/${name}`)).json()) as { overdue?: { at: string } }).overdue;
    // Reconcile runs every second on all three, the one ahead among them: nobody marks it early.
    while (Date.now() - trackedAt < (OVERDUE_SECONDS - 2) * 1000) {
      expect(await overdueOf(), `marked overdue ${Date.now() - trackedAt} ms after it was tracked`).toBeUndefined();
      await sleep(500);
    }
    await eventually(async () => (await overdueOf()) !== undefined, 70_000, 'the job marked overdue');
    const overdue = (await overdueOf()) as { at: string };
    expect(Date.parse(overdue.at) - trackedAt).toBeGreaterThanOrEqual((OVERDUE_SECONDS - 1) * 1000);
    await eventually(
      () => receiver.accepted.some((d) => d.body.data.name === name && d.body.type === 'operation.overdue'),
      10_000,
      'the overdue effect',
    );
    await sleep(2_000);
    expect(receiver.accepted.filter((d) => d.body.data.name === name && d.body.type === 'operation.overdue')).toHaveLength(1);
  });
});
