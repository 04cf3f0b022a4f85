/**
 * A storm of interaction webhooks over instances of Ratchet behind a
 * round-robin front, as Gemini sends them: each delivery sent until it is
 * answered 200, each try to the next instance (one that is down, or answers
 * 503, is tried again at the next), every event twice. Then the checks every
 * multi-instance test makes: each operation at its final state, every
 * acknowledged delivery decided, every state change's effect delivered once
 * (a repeat only with the same id, from a delivery in flight at a fault) in
 * version order, and the change feed the same from every instance.
 */
import { expect } from 'vitest';
import { envelope, signedDelivery } from './deliveries.ts';
import type { RatchetProcess } from './ratchet-process.ts';
import { eventually, type Receiver } from './receiver.ts';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export interface StormOptions {
  /** The instances, in the front's order (an entry may be replaced while the storm runs: a restarted instance). */
  front: RatchetProcess[];
  receiver: Receiver;
  /** The webhook signing secret the instances accept. */
  secret: string;
  prefix: string;
  operations: number;
  workers: number;
  /** Run while the storm goes on (a kill, a database restart), once a quarter of its deliveries are acknowledged. */
  midway?: () => Promise<void>;
  /** How long every final effect may take to arrive after the storm is acknowledged (default 60 s). */
  effectsWithinMs?: number;
  /** Answers a good delivery may get before a 200, besides 503 and no answer at all (0). */
  alsoAllowed?: number[];
}

export interface StormOutcome {
  /** Deliveries tried again (an instance down or answering 503). */
  resent: number;
  /** Effects repeated with their id. */
  repeats: number;
  /** When the last delivery was acknowledged, and when the last final effect arrived (epoch ms). */
  acknowledgedAt: number;
  lastEffectAt: number;
}

export async function stormAndCheck(options: StormOptions): Promise<StormOutcome> {
  const { front, receiver, secret, prefix } = options;
  let turn = 0;
  let resent = 0;
  let acknowledged = 0;
  const deliver = async (payload: object, id: string) => {
    for (;;) {
      const instance = front[turn++ % front.length] as RatchetProcess;
      const { body, headers } = signedDelivery(secret, payload, { id });
      const status = await fetch(`${instance.url}/webhooks/gemini`, {
        method: 'POST',
        body,
        headers,
        signal: AbortSignal.timeout(5_000),
      }).then(
        (response) => response.status,
        () => 0,
      );
      if (status === 200) {
        acknowledged++;
        return;
      }
      resent++;
      // Down, or not recorded: never a 4xx or a 500 for a good delivery.
      expect([0, 503, ...(options.alsoAllowed ?? [])]).toContain(status);
      await sleep(20);
    }
  };
  const names = Array.from({ length: options.operations }, (_, i) => `interactions/${prefix}-${i}`);
  const eventsOf = (name: string) => [
    { id: `${name}:1`, payload: envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:01Z') },
    { id: `${name}:2`, payload: envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:02Z') },
    { id: `${name}:3`, payload: envelope('interaction.completed', { id: name }, '2026-11-30T10:00:03Z') },
  ];
  let next = 0;
  let over = false;
  const storm = Promise.all(
    Array.from({ length: options.workers }, async () => {
      while (next < names.length) {
        const name = names[next++] as string;
        for (const event of eventsOf(name)) {
          // Each event twice, as a retrying sender would: the second is a duplicate.
          await deliver(event.payload, event.id);
          await deliver(event.payload, event.id);
        }
      }
    }),
  ).finally(() => {
    over = true;
  });
  if (options.midway) {
    // Midway by progress, not by time: a fast machine finishes a storm a slow one is only starting.
    const quarter = (options.operations * 6) / 4;
    while (acknowledged < quarter && !over) await sleep(5);
    expect(over).toBe(false);
    await options.midway();
  }
  await storm;
  const acknowledgedAt = Date.now();

  const effectsOf = (name: string) => receiver.accepted.filter((d) => d.body.data.name === name);
  await eventually(
    () => names.every((name) => effectsOf(name).some((d) => d.id === `${name}#3`)),
    options.effectsWithinMs ?? 60_000,
    'every final effect',
  );
  const lastEffectAt = Math.max(...names.map((name) => options.receiver.firstAcceptedAt.get(`${name}#3`) ?? Number.POSITIVE_INFINITY));

  for (const name of names) {
    const record = await (await (front[turn++ % front.length] as RatchetProcess).api(`/operations/${name}`)).json();
    expect(record, name).toMatchObject({ state: 'SUCCEEDED', version: 3, eventId: `${name}:3` });
    // Every acknowledged delivery was decided: its event is among the operation's decisions.
    const { decisions } = (await (await (front[0] as RatchetProcess).api(`/operations/${name}/decisions`)).json()) as {
      decisions: Array<{ eventId: string }>;
    };
    expect(new Set(decisions.map((d) => d.eventId))).toEqual(new Set([`${name}:1`, `${name}:2`, `${name}:3`]));
  }
  await sleep(500);
  for (const name of names) {
    const arrived = effectsOf(name).map((d) => d.id);
    // A repeat only ever of the id just sent (a delivery in flight at a fault); none skipped, none out of order.
    expect(
      arrived.filter((id, i) => id !== arrived[i - 1]),
      name,
    ).toEqual([`${name}#1`, `${name}#3`]);
  }
  const repeats =
    receiver.accepted.filter((d) => names.includes(d.body.data.name)).length -
    new Set(names.flatMap((n) => effectsOf(n).map((d) => d.id))).size;
  expect(repeats).toBeLessThanOrEqual(options.workers * 2);

  // One feed: the same changes in the same order from every instance, each operation's versions in order.
  const feeds = await Promise.all(front.map(readFeed));
  for (const feed of feeds.slice(1)) expect(feed).toEqual(feeds[0]);
  for (const name of names) expect(feeds[0]?.filter((c) => c.name === name).map((c) => c.version)).toEqual([1, 2, 3]);
  console.log(`${front.length} instances (${prefix}): ${resent} deliveries resent; ${repeats} effects repeated with their id`);
  return { resent, repeats, acknowledgedAt, lastEffectAt };
}

/** The whole change feed as one instance reads it. */
export async function readFeed(instance: RatchetProcess): Promise<Array<{ cursor: string; name: string; version: number }>> {
  const all: Array<{ cursor: string; name: string; version: number }> = [];
  let after = '0.0';
  for (;;) {
    const page = (await (await instance.api(`/changes?after=${after}&limit=1000`)).json()) as {
      changes: Array<{ cursor: string; name: string; version: number }>;
      cursor: string;
    };
    if (page.changes.length === 0) return all;
    all.push(...page.changes.map(({ cursor, name, version }) => ({ cursor, name, version })));
    after = page.cursor;
  }
}
