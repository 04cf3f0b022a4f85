/**
 * The effects queues through a real outage, end to end through `npm start`:
 * the receiver down (503, then hanging) for 60 s while 30 operations change
 * state, and a restart in the middle of a backoff. Afterwards every change is
 * delivered once, in version order per operation.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { type Delivery, eventually, Receiver } from '../support/receiver.ts';

const inbound = newSecret();
const outbound = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-outage-'));
let receiver: Receiver;
let ratchet: RatchetProcess;

const start = () =>
  startRatchet({
    DATA_DIR: dataDir,
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_WEBHOOK_TIMEOUT_MS: '500',
    EFFECTS_RETRY_BASE_MS: '200',
    EFFECTS_RETRY_MAX_MS: '2000',
    EFFECTS_RETRY_FOR_SECONDS: '600',
  });

beforeAll(async () => {
  receiver = await new Receiver(outbound).start();
  ratchet = await start();
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Three changes per interaction: REQUIRES_ACTION, a newer REQUIRES_ACTION (a refresh: no effect), SUCCEEDED. */
async function changeState(prefix: string, count: number): Promise<string[]> {
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `interactions/${prefix}-${i}`;
    names.push(id);
    for (const [type, time] of [
      ['interaction.requires_action', '2026-11-30T10:00:01Z'],
      ['interaction.requires_action', '2026-11-30T10:00:02Z'],
      ['interaction.completed', '2026-11-30T10:00:03Z'],
    ] as const) {
      const response = await fetch(`${ratchet.url}/webhooks/gemini`, {
        method: 'POST',
        ...signedDelivery(inbound, envelope(type, { id }, time)),
      });
      expect(response.status).toBe(200);
    }
  }
  return names;
}

function expectOncePerChangeInOrder(names: string[]): void {
  const of = (name: string) => receiver.accepted.filter((d: Delivery) => d.body.data.name === name);
  for (const name of names) {
    expect(of(name).map((d) => [d.body.data.version, d.body.data.state, d.body.data.previousState])).toEqual([
      [1, 'REQUIRES_ACTION', null],
      [3, 'SUCCEEDED', 'REQUIRES_ACTION'],
    ]);
  }
}

describe('effects through a receiver outage', () => {
  it('keeps 30 operations waiting in order through 60 s of 503s and hangs, then delivers every change once', async () => {
    receiver.mode = 'fail';
    const outageStarted = Date.now();
    const names = await changeState('down', 30);
    await eventually(() => receiver.refused > 30, 20_000, 'refused attempts');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 30_000 - (Date.now() - outageStarted))));
    receiver.mode = 'hang';
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, 60_000 - (Date.now() - outageStarted))));
    expect(receiver.accepted).toEqual([]);
    receiver.mode = 'ok';
    await eventually(() => receiver.accepted.length >= names.length * 2, 30_000, 'every change after the outage');
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // anything extra would arrive now
    expect(receiver.accepted).toHaveLength(names.length * 2);
    expectOncePerChangeInOrder(names);
  }, 120_000);

  it('resumes after a restart in the middle of a backoff: nothing lost, nothing sent twice', async () => {
    receiver.mode = 'fail';
    const before = receiver.accepted.length;
    const refusedBefore = receiver.refused;
    const names = await changeState('restart', 5);
    await eventually(() => receiver.refused > refusedBefore + 5, 20_000, 'refused attempts');
    await ratchet.stop('SIGTERM');
    ratchet = await start();
    receiver.mode = 'ok';
    await eventually(() => receiver.accepted.length - before >= names.length * 2, 30_000, 'every change after the restart');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(receiver.accepted.length - before).toBe(names.length * 2);
    expectOncePerChangeInOrder(names);
  }, 60_000);
});
