/**
 * On PostgreSQL an effect is queued by the write that makes its change, in
 * the same transaction, by an instance with effects on: the changes made
 * while effects were off are never delivered, not even once they are turned
 * on (SQLite's outbox, which keeps a day, delivers them first: first-hour
 * test). docs/operations.md says so, and so does the start line of an
 * instance with effects off. Held here with `ratchet start` as a process.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const inbound = newSecret();
const outbound = newSecret();
const schema = `effects_off_${process.pid}`;
let receiver: Receiver;
let ratchet: RatchetProcess | undefined;

const start = (effects: boolean) =>
  startRatchet({
    DATABASE_URL: inject('postgresUrl'),
    DATABASE_SCHEMA: schema,
    WEBHOOK_SIGNING_SECRETS: inbound,
    POWERTOOLS_LOG_LEVEL: 'INFO',
    ...(effects && { EFFECTS_WEBHOOK_URL: receiver.url, EFFECTS_SIGNING_SECRET: outbound }),
  });

async function deliver(name: string): Promise<void> {
  const { body, headers } = signedDelivery(inbound, envelope('batch.succeeded', { id: name }));
  const answer = await fetch(`${(ratchet as RatchetProcess).url}/webhooks/gemini`, { method: 'POST', body, headers });
  expect(await answer.json()).toMatchObject({ applied: true });
}

beforeAll(async () => {
  receiver = await new Receiver(outbound).start();
});
afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
});

describe('effects turned on later, on PostgreSQL', () => {
  it('deliver the changes made from then on, never those made while they were off, as the start line said', async () => {
    ratchet = await start(false);
    await deliver('batches/while-off');
    await ratchet.stop();
    expect(ratchet.output()).toMatch(
      /"message":"effects off: EFFECTS_WEBHOOK_URL is not set; on PostgreSQL the state changes made meanwhile are never delivered, not even once it is set"/,
    );

    ratchet = await start(true);
    await deliver('batches/after-on');
    await eventually(
      () => receiver.applied().some((d) => d.body.data.name === 'batches/after-on'),
      20_000,
      'the change made with effects on',
    );
    // Nothing else comes: a second more (the queue is polled every 250 ms), and only the later change was delivered.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(receiver.applied().map((d) => d.body.data.name)).toEqual(['batches/after-on']);
    expect(ratchet.output()).not.toContain('effects off');
  });
});
