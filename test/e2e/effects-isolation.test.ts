/**
 * Per-operation effects queues, end to end through `npm start`: one
 * operation's receiver route failing for good does not slow the others; it
 * is dead-lettered after EFFECTS_RETRY_FOR_SECONDS (shortened here), its later
 * versions wait behind it, and `npm run redrive` delivers them all in order.
 * Redirects never count as deliveries; 410 Gone dead-letters at once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../app/effects/dead-letters.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type RatchetProcess, runToExit, startRatchet, TEST_API_TOKEN } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const inbound = newSecret();
const outbound = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-isolation-'));
const RETRY_FOR_SECONDS = 6;
let receiver: Receiver;
let ratchet: RatchetProcess;

beforeAll(async () => {
  receiver = await new Receiver(outbound).start();
  ratchet = await startRatchet({
    DATA_DIR: dataDir,
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_WEBHOOK_TIMEOUT_MS: '500',
    EFFECTS_RETRY_BASE_MS: '100',
    EFFECTS_RETRY_MAX_MS: '1000',
    EFFECTS_RETRY_FOR_SECONDS: String(RETRY_FOR_SECONDS),
  });
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function deliver(type: string, id: string, time: string): Promise<number> {
  const response = await fetch(`${ratchet.url}/webhooks/gemini`, {
    method: 'POST',
    ...signedDelivery(inbound, envelope(type, { id }, time)),
  });
  expect(response.status).toBe(200);
  return Date.now();
}

const deadLetters = async () => ((await (await ratchet.api(`/effects/dead-letters`)).json()) as { deadLetters: DeadLetter[] }).deadLetters;

/** Effect lag (webhook answered 200 -> receiver got the effect) for `count` operations, one change each. */
async function lags(prefix: string, count: number): Promise<number[]> {
  const sentAt = new Map<string, number>();
  for (let i = 0; i < count; i++) {
    const name = `batches/${prefix}-${i}`;
    sentAt.set(`${name}#1`, await deliver('batch.succeeded', name, '2026-11-30T10:00:00Z'));
  }
  await eventually(() => [...sentAt.keys()].every((key) => receiver.firstAcceptedAt.has(key)), 30_000, `${prefix} effects`);
  return [...sentAt].map(([key, at]) => (receiver.firstAcceptedAt.get(key) as number) - at).sort((a, b) => a - b);
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] as number;

describe('one failing operation among many', () => {
  it("does not slow the others' effects; it is dead-lettered, its later versions wait, and redrive delivers them in order", async () => {
    const quiet = await lags('quiet', 50);

    // The bad route: every delivery for this one operation is answered 503.
    const bad = 'interactions/bad';
    receiver.mode = 'fail';
    receiver.refuseOnly = (name) => name === bad;
    await deliver('interaction.requires_action', bad, '2026-11-30T10:00:01Z');
    await deliver('interaction.completed', bad, '2026-11-30T10:00:02Z');
    const noisy = await lags('noisy', 50);
    const figures = {
      quiet: { p50: percentile(quiet, 50), p95: percentile(quiet, 95) },
      withFailing: { p50: percentile(noisy, 50), p95: percentile(noisy, 95) },
    };
    console.log(`effect lag (ms, webhook 200 -> receiver): ${JSON.stringify(figures)}`);
    // Within 2x of the run without the failing operation (plus a little for a shared, noisy machine).
    expect(figures.withFailing.p95).toBeLessThanOrEqual(2 * figures.quiet.p95 + 100);

    // After the retry window the first transition is dead, and the next one waits behind it.
    await eventually(async () => (await deadLetters()).length === 2, (RETRY_FOR_SECONDS + 15) * 1000, 'the dead letters');
    expect((await deadLetters()).map((l) => [l.idempotencyKey, l.reason, l.status, l.transition.state])).toEqual([
      [`${bad}#1`, 'retries-exhausted', 'dead', 'REQUIRES_ACTION'],
      [`${bad}#2`, 'waiting-behind', 'dead', 'SUCCEEDED'],
    ]);
    const [first] = await deadLetters();
    expect(first).toMatchObject({ lastError: expect.stringContaining('answered 503'), attempts: expect.any(Number) });
    expect(first?.attempts).toBeGreaterThan(3);
    expect(JSON.parse(first?.body ?? '{}')).toMatchObject({ type: 'operation.state_changed', data: { name: bad, version: 1 } });
    expect(receiver.accepted.filter((d) => d.body.data.name === bad)).toEqual([]);

    // The receiver is fixed; redrive delivers both, in order.
    receiver.refuseOnly = undefined;
    receiver.mode = 'ok';
    const run = await runToExit(['npm', 'run', 'redrive'], {
      ...process.env,
      RATCHET_URL: ratchet.url,
      RATCHET_API_TOKEN: TEST_API_TOKEN,
    } as Record<string, string>);
    expect(run.output).toContain('2 re-queued, 0 skipped');
    expect(run.code).toBe(0);
    await eventually(() => receiver.accepted.filter((d) => d.body.data.name === bad).length === 2, 15_000, 'the re-driven effects');
    expect(receiver.accepted.filter((d) => d.body.data.name === bad).map((d) => d.body.data.version)).toEqual([1, 2]);
    await eventually(async () => (await deadLetters()).length === 0, 10_000, 'the letters cleared');
  }, 120_000);
});

describe('honest delivery', () => {
  it('never counts a 302 or 307 as delivered (the redirect is not followed), and 410 dead-letters at once', async () => {
    for (const mode of ['redirect-302', 'redirect-307'] as const) {
      const name = `batches/${mode}`;
      receiver.mode = mode;
      receiver.refuseOnly = (n) => n === name;
      const refused = receiver.refused;
      await deliver('batch.succeeded', name, '2026-11-30T10:00:00Z');
      await eventually(() => receiver.refused >= refused + 2, 10_000, `${mode} retried`);
      expect(receiver.followedRedirects).toBe(0);
      expect(receiver.accepted.filter((d) => d.body.data.name === name)).toEqual([]);
      receiver.mode = 'ok';
      await eventually(() => receiver.accepted.some((d) => d.body.data.name === name), 10_000, `${mode} delivered once it answers 2xx`);
    }

    const gone = 'batches/gone';
    receiver.mode = 'gone';
    receiver.refuseOnly = (n) => n === gone;
    const refused = receiver.refused;
    await deliver('batch.succeeded', gone, '2026-11-30T10:00:00Z');
    await eventually(async () => (await deadLetters()).some((l) => l.name === gone), 10_000, 'the 410 dead letter');
    expect((await deadLetters()).find((l) => l.name === gone)).toMatchObject({ reason: 'gone', attempts: 1 });
    expect(receiver.refused).toBe(refused + 1);
    receiver.mode = 'ok';
    receiver.refuseOnly = undefined;
  });
});
