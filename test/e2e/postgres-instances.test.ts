/**
 * Three `ratchet start` processes on one PostgreSQL database, as an app runs
 * them behind a load balancer. Gemini's side is played as Gemini plays it:
 * every delivery is sent until it is answered 200, each to the next instance
 * in turn (a round-robin front that skips a dead one). One instance is killed
 * with `kill -9` mid-storm and started again. In the end: every operation at
 * its final state, every acknowledged delivery decided (applied or refused:
 * its event is in the operation's decisions), every state change's effect
 * delivered once (a repeat only with the same id, from a delivery in flight at
 * the kill) in version order per operation, and the change feed read from each
 * instance the same. Then reconcile: jobs whose polls are held answered by
 * fake Gemini are each polled by one instance only, however many reconcile.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PGBOUNCER, startPgBouncer, type TestPgBouncer } from '../support/pgbouncer.ts';
import { killHard, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const inbound = newSecret();
const outbound = newSecret();
const schema = `rt_instances_${Date.now().toString(36)}`;
const OPERATIONS = 45;
const WORKERS = 6;
let receiver: Receiver;
let gemini: FakeGemini;
const instances: RatchetProcess[] = [];

const start = () =>
  startRatchet({
    DATABASE_URL: inject('postgresUrl'),
    DATABASE_SCHEMA: schema,
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_RETRY_BASE_MS: '100',
    EFFECTS_RETRY_MAX_MS: '500',
    GEMINI_API_KEY: gemini.apiKey,
    GEMINI_BASE_URL: gemini.baseUrl,
    RECONCILE_INTERVAL_SECONDS: '0.5',
  });

beforeAll(async () => {
  receiver = await new Receiver(outbound).start();
  gemini = await new FakeGemini().start();
  // The first starts alone (it migrates the new schema); the others find it done.
  instances.push(await start());
  instances.push(...(await Promise.all([start(), start()])));
}, 120_000);
afterAll(async () => {
  await Promise.all(instances.map((instance) => instance.stop()));
  await receiver?.stop();
  await gemini?.stop();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let turn = 0;
let resent = 0;
/** Sent until answered 200, each try to the next instance of `front` (whatever is up there now). */
async function deliverUntilAcknowledged(front: RatchetProcess[], payload: object, id: string): Promise<void> {
  for (;;) {
    const instance = front[turn++ % front.length] as RatchetProcess;
    const { body, headers } = signedDelivery(inbound, payload, { id });
    const status = await fetch(`${instance.url}/webhooks/gemini`, {
      method: 'POST',
      body,
      headers,
      signal: AbortSignal.timeout(5_000),
    }).then(
      (response) => response.status,
      () => 0,
    );
    if (status === 200) return;
    resent++;
    expect([0, 503]).toContain(status); // down, or not recorded: never a 4xx or a 500 for a good delivery
    await sleep(20);
  }
}

async function readFeed(instance: RatchetProcess): Promise<Array<{ cursor: string; name: string; version: number }>> {
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

/**
 * A storm of OPERATIONS interactions (three events each, each sent twice) over
 * `front`, `midway` run while it goes on; then every check of the file's
 * header, with `receiver` the effects' receiver of these instances.
 */
async function stormAndCheck(front: RatchetProcess[], receiver: Receiver, prefix: string, midway?: () => Promise<void>): Promise<void> {
  const names = Array.from({ length: OPERATIONS }, (_, i) => `interactions/${prefix}-${i}`);
  const eventsOf = (name: string) => [
    { id: `${name}:1`, payload: envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:01Z') },
    { id: `${name}:2`, payload: envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:02Z') },
    { id: `${name}:3`, payload: envelope('interaction.completed', { id: name }, '2026-11-30T10:00:03Z') },
  ];
  let next = 0;
  let over = false;
  const storm = Promise.all(
    Array.from({ length: WORKERS }, async () => {
      while (next < names.length) {
        const name = names[next++] as string;
        for (const event of eventsOf(name)) {
          // Each event twice, as a retrying sender would: the second is a duplicate.
          await deliverUntilAcknowledged(front, event.payload, event.id);
          await deliverUntilAcknowledged(front, event.payload, event.id);
        }
      }
    }),
  ).finally(() => {
    over = true;
  });
  if (midway) {
    await sleep(700);
    expect(over).toBe(false);
    await midway();
  }
  await storm;

  for (const name of names) {
    const record = await (await (front[turn++ % front.length] as RatchetProcess).api(`/operations/${name}`)).json();
    expect(record, name).toMatchObject({ state: 'SUCCEEDED', version: 3, eventId: `${name}:3` });
    // Every acknowledged delivery was decided: its event is among the operation's decisions.
    const { decisions } = (await (await (front[0] as RatchetProcess).api(`/operations/${name}/decisions`)).json()) as {
      decisions: Array<{ eventId: string }>;
    };
    expect(new Set(decisions.map((d) => d.eventId))).toEqual(new Set([`${name}:1`, `${name}:2`, `${name}:3`]));
  }

  const effectsOf = (name: string) => receiver.accepted.filter((d) => d.body.data.name === name);
  await eventually(() => names.every((name) => effectsOf(name).some((d) => d.id === `${name}#3`)), 60_000, 'every effect');
  await sleep(500);
  for (const name of names) {
    const arrived = effectsOf(name).map((d) => d.id);
    // A repeat only ever of the id just sent (a delivery in flight at the kill); none skipped, none out of order.
    expect(
      arrived.filter((id, i) => id !== arrived[i - 1]),
      name,
    ).toEqual([`${name}#1`, `${name}#3`]);
  }
  const repeats = receiver.accepted.length - receiver.applied().length;
  expect(repeats).toBeLessThanOrEqual(WORKERS * 2);

  // One feed: the same changes in the same order from every instance, each operation's versions in order.
  const feeds = await Promise.all(front.map(readFeed));
  for (const feed of feeds.slice(1)) expect(feed).toEqual(feeds[0]);
  for (const name of names) expect(feeds[0]?.filter((c) => c.name === name).map((c) => c.version)).toEqual([1, 2, 3]);
  console.log(`${front.length} instances (${prefix}): ${resent} deliveries resent so far; ${repeats} effects repeated with their id`);
}

describe('three instances on one PostgreSQL database', () => {
  it('a storm spread over them, one killed with kill -9 and started again: nothing acknowledged lost, each effect once in order, one feed', {
    timeout: 180_000,
  }, async () => {
    await stormAndCheck(instances, receiver, 'pg', async () => {
      await killHard(instances[1] as RatchetProcess);
      await sleep(300);
      instances[1] = await start();
    });
    expect(resent).toBeGreaterThan(0);
  });

  it('reconcile on three instances polls each due job once at a time', { timeout: 60_000 }, async () => {
    const jobs = Array.from({ length: 6 }, (_, i) => `batches/pg-due-${i}`);
    for (const job of jobs) {
      gemini.batches.set(job, { state: 'BATCH_STATE_RUNNING', updateTime: '2026-11-30T10:00:00Z' });
      // Each poll of it waits until released: a second instance polling it meanwhile would show as a second request.
      gemini.holding.add(job);
    }
    for (const [i, job] of jobs.entries()) {
      const response = await (instances[i % 3] as RatchetProcess).api('/operations', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: job }),
      });
      expect(response.status).toBeLessThan(300);
    }
    await eventually(() => jobs.every((job) => gemini.requests.includes(job)), 20_000, 'every job polled');
    // Six reconcile rounds on each instance while the polls are held.
    await sleep(3_000);
    for (const job of jobs) expect(gemini.requests.filter((r) => r === job).length, job).toBe(1);
    for (const job of jobs) {
      gemini.batches.set(job, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T11:00:00Z' });
      gemini.release(job);
    }
    await eventually(
      async () => {
        for (const job of jobs) {
          const record = (await (await (instances[2] as RatchetProcess).api(`/operations/${job}`)).json()) as { state: string };
          if (record.state !== 'SUCCEEDED') return false;
        }
        return true;
      },
      20_000,
      'every job succeeded',
    );
  });
});

describe.skipIf(!PGBOUNCER && !process.env.CI)('two instances through PgBouncer in transaction mode', () => {
  let bouncer: TestPgBouncer;
  let through: Receiver;
  const front: RatchetProcess[] = [];
  beforeAll(async () => {
    bouncer = await startPgBouncer(inject('postgresUrl'), 4);
    through = await new Receiver(outbound).start();
    const env = {
      DATABASE_URL: bouncer.url,
      DATABASE_SCHEMA: `${schema}_bouncer`,
      WEBHOOK_SIGNING_SECRETS: inbound,
      EFFECTS_WEBHOOK_URL: through.url,
      EFFECTS_SIGNING_SECRET: outbound,
      EFFECTS_RETRY_BASE_MS: '100',
      EFFECTS_RETRY_MAX_MS: '500',
    };
    front.push(await startRatchet(env));
    front.push(await startRatchet(env));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(front.map((instance) => instance.stop()));
    await through?.stop();
    await bouncer?.stop();
  });

  it('the same storm: nothing acknowledged lost, each effect once in order, one feed (LISTEN hears nothing there: the polls wake)', {
    timeout: 180_000,
  }, async () => {
    await stormAndCheck(front, through, 'bouncer');
  });
});
