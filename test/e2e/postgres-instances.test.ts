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
import { newSecret } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PGBOUNCER, startPgBouncer, type TestPgBouncer } from '../support/pgbouncer.ts';
import { killHard, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';
import { stormAndCheck } from '../support/storm.ts';

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

describe('three instances on one PostgreSQL database', () => {
  it('a storm spread over them, one killed with kill -9 and started again: nothing acknowledged lost, each effect once in order, one feed', {
    timeout: 180_000,
  }, async () => {
    const { resent } = await stormAndCheck({
      front: instances,
      receiver,
      secret: inbound,
      prefix: 'pg',
      operations: OPERATIONS,
      workers: WORKERS,
      midway: async () => {
        await killHard(instances[1] as RatchetProcess);
        await sleep(300);
        instances[1] = await start();
      },
    });
    expect(resent).toBeGreaterThan(0);
  });

  it('signs the console in on every instance: a link asked of one is taken once at another, and its session is honoured by all', async () => {
    const [first, second, third] = instances as [RatchetProcess, RatchetProcess, RatchetProcess];
    const asked = await fetch(`${first.url}/login/link?next=/console/`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.apiToken}` },
    });
    expect(asked.status).toBe(200);
    const { link } = (await asked.json()) as { link: string };
    const code = new URL(link).search;
    // Taken at the second instance (a round-robin front): signed in there.
    const taken = await fetch(`${second.url}/login${code}`, { redirect: 'manual' });
    expect(taken.status).toBe(303);
    const cookie = (taken.headers.get('set-cookie') ?? '').split(';')[0] as string;
    expect(cookie).toMatch(/^ratchet_session=.+/);
    // Once only, at any instance.
    expect((await fetch(`${first.url}/login${code}`, { redirect: 'manual' })).status).toBe(401);
    const page = (instance: RatchetProcess) =>
      fetch(`${instance.url}/`, { headers: { cookie, accept: 'text/html' }, redirect: 'manual' }).then((r) => r.status);
    expect(await Promise.all(instances.map(page))).toEqual([200, 200, 200]);
    // Signed out at the third: signed out at all of them.
    const out = await fetch(`${third.url}/logout`, {
      method: 'POST',
      headers: { cookie, origin: 'null', 'sec-fetch-site': 'same-origin' },
      redirect: 'manual',
    });
    expect(out.status).toBe(303);
    expect((await Promise.all(instances.map(page))).every((status) => status !== 200)).toBe(true);
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
    await stormAndCheck({ front, receiver: through, secret: inbound, prefix: 'bouncer', operations: OPERATIONS, workers: WORKERS });
  });
});
