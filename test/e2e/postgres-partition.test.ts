/**
 * A silent partition between one of two `ratchet start` instances and
 * PostgreSQL, mid-storm: a proxy in front of the database stops forwarding
 * both ways for 30 s without closing anything (no RST, no FIN), as a network
 * that drops packets does, then forwards again. With the default settings the
 * cut-off instance answers 503 `not-recorded` (with Retry-After) within 10 s
 * of the cut, never hangs a request longer, says so on `/healthz`, delivers
 * no effect past the lease it could no longer renew, and serves again within
 * 5 s of the network's return; the other instance carries on and takes its
 * effects once their claims end; nothing acknowledged is lost.
 *
 * "No effect delivered twice", exactly: an effect the cut-off instance handed
 * to the receiver just as the network went, whose settle (the ledger row that
 * says so) never reached the database, is offered again by the other instance
 * once its lease ends, with the same webhook-id: only the receiver knew. The
 * instance names each such effect in its log ("a claim could not be
 * settled"); a repeat of any other effect fails the test, and so does a
 * repeat that overlaps the lease.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type PgProxy, startPgProxy } from '../support/pg-proxy.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';
import { stormAndCheck } from '../support/storm.ts';

const url = inject('postgresUrl');
const inbound = newSecret();
const outbound = newSecret();
const CUT_MS = 30_000;
/** EFFECTS_LEASE_SECONDS's default. */
const LEASE_MS = 5_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let receiver: Receiver;
let proxy: PgProxy;
const front: RatchetProcess[] = [];
beforeAll(async () => {
  receiver = await new Receiver(outbound).start();
  const target = new URL(url);
  proxy = await startPgProxy({ host: target.hostname, port: Number(target.port) });
  const schema = `rt_partition_${Date.now().toString(36)}`;
  // Each instance's effects come to the receiver with a query of their own: who delivered what.
  const start = (databaseUrl: string, from: string) =>
    startRatchet({
      DATABASE_URL: databaseUrl,
      DATABASE_SCHEMA: schema,
      WEBHOOK_SIGNING_SECRETS: inbound,
      EFFECTS_WEBHOOK_URL: `${receiver.url}?from=${from}`,
      EFFECTS_SIGNING_SECRET: outbound,
      EFFECTS_RETRY_BASE_MS: '100',
      EFFECTS_RETRY_MAX_MS: '500',
    });
  front.push(await start(proxy.urlFor(url), 'cut'));
  front.push(await start(url, 'other'));
}, 120_000);
afterAll(async () => {
  proxy?.heal();
  await Promise.all(front.map((instance) => instance.stop()));
  await proxy?.stop();
  await receiver?.stop();
});

interface Probe {
  name: string;
  sentAt: number;
  answeredAt: number;
  status: number;
  retryAfter: string | null;
  error?: string;
}

/** One webhook to `instance` about an operation of its own: when it was answered, and how. */
async function probe(instance: RatchetProcess, name: string): Promise<Probe> {
  const { body, headers } = signedDelivery(inbound, envelope('interaction.requires_action', { id: name }, '2026-11-30T10:00:01Z'));
  const sentAt = Date.now();
  try {
    // Far above the 10 s asked: a request that hangs is measured, not cut short.
    const response = await fetch(`${instance.url}/webhooks/gemini`, { method: 'POST', body, headers, signal: AbortSignal.timeout(60_000) });
    const answer = (await response.json().catch(() => ({}))) as { error?: string };
    return {
      name,
      sentAt,
      answeredAt: Date.now(),
      status: response.status,
      retryAfter: response.headers.get('retry-after'),
      ...(answer.error && { error: answer.error }),
    };
  } catch {
    return { name, sentAt, answeredAt: Date.now(), status: 0, retryAfter: null };
  }
}

/** The effects the instance said it delivered or tried but could not settle (its log lines, JSON). */
function unsettledIn(output: string): Set<string> {
  const named = new Set<string>();
  for (const line of output.split('\n')) {
    if (!line.includes('a claim could not be settled')) continue;
    const effects = (JSON.parse(line.slice(line.indexOf('{'))) as { effects?: string[] }).effects ?? [];
    for (const effect of effects) named.add(effect);
  }
  return named;
}

describe('one of two instances cut off from PostgreSQL silently for 30 s, mid-storm', () => {
  it('503 within 10 s there, its effects to the other, none twice but what it could not settle, serving within 5 s of the heal', {
    timeout: 240_000,
  }, async () => {
    const [cut] = front as [RatchetProcess, RatchetProcess];
    let cutAt = Number.NaN;
    let healAt = Number.NaN;
    const probes: Array<Promise<Probe>> = [];
    let health: { status: number; retryAfter: string | null; store?: string; tookMs: number } | undefined;
    await stormAndCheck({
      front,
      receiver,
      secret: inbound,
      prefix: 'partition',
      operations: 40,
      workers: 6,
      midway: async () => {
        // The cut comes as the receiver takes one of that instance's deliveries, before it answers: the settle that
        // would record it cannot reach the database, and the other instance offers it again once its lease ends.
        await new Promise<void>((cutNow) => {
          receiver.onAccepted = (arrival) => {
            if (!arrival.path.includes('from=cut')) return;
            receiver.onAccepted = undefined;
            cutAt = Date.now();
            proxy.cut();
            cutNow();
          };
        });
        // A webhook to the cut-off instance every 250 ms, through the cut and 8 s past the heal.
        let n = 0;
        const probing = (async () => {
          while (Number.isNaN(healAt) || Date.now() < healAt + 8_000) {
            probes.push(probe(cut, `interactions/partition-probe-${n++}`));
            await sleep(250);
          }
        })();
        await sleep(1_000);
        const asked = Date.now();
        const healthz = fetch(`${cut.url}/healthz`, { signal: AbortSignal.timeout(60_000) }).then(
          async (answer) => ({
            status: answer.status,
            retryAfter: answer.headers.get('retry-after'),
            store: ((await answer.json()) as { store?: string }).store,
            tookMs: Date.now() - asked,
          }),
          () => ({ status: 0, retryAfter: null, tookMs: Date.now() - asked }),
        );
        await sleep(CUT_MS - (Date.now() - cutAt));
        healAt = Date.now();
        proxy.reset();
        proxy.heal();
        health = await healthz;
        await probing;
      },
    });
    const answers = await Promise.all(probes);
    for (const instance of front) expect(instance.child.exitCode, instance.output().slice(-2_000)).toBeNull();

    // While cut off: every webhook answered within 10 s, 503 not-recorded with Retry-After (or 200 once the network is back).
    const during = answers.filter((p) => p.sentAt < healAt);
    const slowest = Math.max(...during.map((p) => p.answeredAt - p.sentAt));
    const first503 = Math.min(...during.filter((p) => p.status === 503).map((p) => p.answeredAt));
    console.log(
      `cut off: first 503 ${first503 - cutAt} ms after the cut; slowest answer ${slowest} ms; /healthz ${health?.status} in ${health?.tookMs} ms`,
    );
    expect(first503 - cutAt).toBeLessThan(10_000);
    expect(slowest).toBeLessThan(10_000);
    for (const p of during) {
      if (p.status === 200) expect(p.answeredAt, p.name).toBeGreaterThanOrEqual(healAt);
      else expect(p, p.name).toMatchObject({ status: 503, error: 'not-recorded', retryAfter: expect.stringMatching(/^[1-9]\d*$/) });
    }
    expect(during.filter((p) => p.status === 503).length).toBeGreaterThan(CUT_MS / 250 / 2);
    expect(health).toMatchObject({ status: 503, store: 'unavailable', retryAfter: expect.stringMatching(/^[1-9]\d*$/) });
    expect(health?.tookMs).toBeLessThan(10_000);

    // After the heal: serving within 5 s, and every webhook sent from then on recorded.
    const recovered = Math.min(...answers.filter((p) => p.status === 200 && p.sentAt >= healAt).map((p) => p.answeredAt));
    console.log(`healed: first 200 ${recovered - healAt} ms after the network's return`);
    expect(recovered - healAt).toBeLessThan(5_000);
    for (const p of answers.filter((p) => p.sentAt >= healAt + 5_000)) expect(p.status, p.name).toBe(200);

    // Every probe recorded (answered 200) has its effect, from one instance or the other.
    const recorded = answers.filter((p) => p.status === 200).map((p) => `${p.name}#1`);
    await eventually(() => recorded.every((id) => receiver.firstAcceptedAt.has(id)), 30_000, "every recorded probe's effect");
    await sleep(LEASE_MS + 1_000);

    // The cut-off instance delivered nothing once the leases it held at the cut had ended.
    const fromCut = receiver.arrivals.filter((a) => a.path.includes('from=cut'));
    const late = fromCut.filter((a) => a.at >= cutAt + LEASE_MS && a.at < healAt);
    expect(late).toEqual([]);

    // Twice only what it could not settle: the same webhook-id, first from it, again after its lease.
    const unsettled = unsettledIn(cut.output());
    const byId = new Map<string, typeof receiver.arrivals>();
    for (const arrival of receiver.arrivals) byId.set(arrival.id, [...(byId.get(arrival.id) ?? []), arrival]);
    const repeated = [...byId].filter(([, arrivals]) => arrivals.length > 1);
    console.log(
      `${receiver.arrivals.length} deliveries, ${byId.size} effects; ${repeated.length} repeated, ${unsettled.size} named unsettled by the cut-off instance`,
    );
    for (const [id, arrivals] of repeated) {
      expect(unsettled, `${id} repeated: ${JSON.stringify(arrivals)}`).toContain(id);
      const [first, ...again] = arrivals as [(typeof arrivals)[0], ...typeof arrivals];
      expect(first.path).toContain('from=cut');
      expect(first.at).toBeGreaterThanOrEqual(cutAt - LEASE_MS);
      for (const next of again) expect(next.at, id).toBeGreaterThan(first.at);
    }
    expect(repeated.length).toBeLessThanOrEqual(unsettled.size);
    // The delivery the cut fell on is one of them: the window is seen on every run, not by chance.
    expect(repeated.length).toBeGreaterThanOrEqual(1);

    // Its LISTEN connection noticed, and listens again since the heal.
    expect(cut.output()).toMatch(/LISTEN connection lost/);
    expect(proxy.exchanges().filter((statement) => statement.startsWith('LISTEN'))).not.toEqual([]);
  });
});
