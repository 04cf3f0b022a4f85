/**
 * Side effects end to end: npm start with the outbound webhook sink pointed
 * at a test receiver on 127.0.0.1. Shuffled and duplicated Gemini deliveries
 * go in; exactly the applied state changes come out, once each, in order per
 * operation, through receiver failures and a restart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationRecord } from '../../core/reducer.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { outboxChanges } from '../support/engine-file.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { type Delivery, eventually, Receiver } from '../support/receiver.ts';

const inboundSecret = newSecret();
const outboundSecret = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-effects-'));
let receiver: Receiver;
let ratchet: RatchetProcess;

const start = () =>
  startRatchet({
    DATA_DIR: dataDir,
    WEBHOOK_SIGNING_SECRETS: inboundSecret,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outboundSecret,
    EFFECTS_RETRY_BASE_MS: '100',
    EFFECTS_RETRY_MAX_MS: '1000',
    // Short enough for the hang case to pass quickly, long enough that a loaded machine does not time out a healthy answer (a redelivery).
    EFFECTS_WEBHOOK_TIMEOUT_MS: '1000',
  });

beforeAll(async () => {
  receiver = await new Receiver(outboundSecret).start();
  ratchet = await start();
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

type Payload = { body: string; headers: Record<string, string> };

/** Gemini-style deliveries for `count` operations: each delivered twice (same webhook-id), plus stale and conflicting ones. */
function deliveriesFor(prefix: string, count: number): Payload[] {
  const out: Payload[] = [];
  for (let i = 0; i < count; i++) {
    const interaction = `interactions/${prefix}-${i}`;
    const batch = `batches/${prefix}-${i}`;
    const events = [
      envelope('interaction.requires_action', { id: interaction }, '2026-11-30T10:00:01Z'),
      envelope('interaction.requires_action', { id: interaction }, '2026-11-30T10:00:02.5Z'),
      envelope('interaction.completed', { id: interaction }, '2026-11-30T10:00:03Z'),
      envelope('interaction.failed', { id: interaction }, '2026-11-30T10:00:04Z'),
      envelope('batch.succeeded', { id: `batch_${prefix}-${i}` }, '2026-11-30T10:00:03.000001Z'),
      envelope('batch.succeeded', { id: batch }, '2026-11-30T10:00:02Z'),
    ];
    for (const event of events) {
      const delivery = signedDelivery(inboundSecret, event);
      out.push(delivery, delivery);
    }
  }
  return shuffle(out);
}

async function send(deliveries: Payload[]): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < deliveries.length) {
        const { body, headers } = deliveries[next++] as Payload;
        const response = await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers });
        expect(response.status).toBe(200);
      }
    }),
  );
}

/** `<name>#<version>` of every write that changed the state, from the engine's own outbox (its table stream). */
async function stateChangesInStream(prefix: string): Promise<string[]> {
  return outboxChanges(ratchet.dataFile)
    .filter((change) => change.stateChanged && change.name.includes(`/${prefix}-`))
    .map((change) => `${change.name}#${change.version}`);
}

const ofPrefix = (deliveries: Delivery[], prefix: string) => deliveries.filter((d) => d.body.data.name.includes(`/${prefix}-`));

/** Per operation, the applied transitions chain: versions increase, each previousState is the state before. */
function expectOrderedChains(applied: Delivery[]): void {
  const last = new Map<string, { version: number; state: string }>();
  for (const { body } of applied) {
    const { name, version, state, previousState } = body.data;
    const before = last.get(name);
    expect(version).toBeGreaterThan(before?.version ?? 0);
    expect(previousState).toBe(before?.state ?? null);
    expect(state).not.toBe(previousState);
    last.set(name, { version, state });
  }
}

describe('effects from the stream', () => {
  it('delivers exactly the applied state changes, once each, in order per operation, all signed', async () => {
    await send(deliveriesFor('mixed', 12));
    const expected = await stateChangesInStream('mixed');
    expect(expected.length).toBeGreaterThanOrEqual(24); // at least one change per operation
    await eventually(() => ofPrefix(receiver.applied(), 'mixed').length >= expected.length, 30_000, 'all transitions');
    await new Promise((resolve) => setTimeout(resolve, 1_000)); // anything extra would arrive now

    const applied = ofPrefix(receiver.applied(), 'mixed');
    expect(applied.map((d) => d.id).sort()).toEqual([...expected].sort());
    expect(ofPrefix(receiver.accepted, 'mixed')).toHaveLength(applied.length); // healthy path: no redelivery at all
    expect(applied.every((d) => d.signatureValid && d.body.type === 'operation.state_changed')).toBe(true);
    expectOrderedChains(applied);
    for (let i = 0; i < 12; i++) {
      const name = `interactions/mixed-${i}`;
      const stored = (await (await ratchet.api(`/operations/${name}`)).json()) as OperationRecord;
      const sent = applied.filter((d) => d.body.data.name === name);
      // Whichever terminal state landed first is the only one that went out, and it is the stored one.
      expect(sent.filter((d) => ['SUCCEEDED', 'FAILED'].includes(d.body.data.state))).toHaveLength(1);
      expect(sent.at(-1)?.body.data.state).toBe(stored.state);
    }
  });

  it('keeps every transition, in order, while the receiver fails and hangs, and delivers it all after', async () => {
    receiver.mode = 'fail';
    await send(deliveriesFor('outage', 4));
    await eventually(() => receiver.refused >= 3, 10_000, 'refused deliveries');
    receiver.mode = 'hang';
    const refused = receiver.refused;
    await eventually(() => receiver.refused > refused, 10_000, 'a hanging delivery');
    receiver.mode = 'ok';

    const expected = await stateChangesInStream('outage');
    await eventually(() => ofPrefix(receiver.applied(), 'outage').length >= expected.length, 60_000, 'delivery after the outage');
    const applied = ofPrefix(receiver.applied(), 'outage');
    expect(applied.map((d) => d.id).sort()).toEqual([...expected].sort());
    expectOrderedChains(applied);
  });

  it('loses nothing and repeats nothing across a restart in the middle of the stream', async () => {
    const before = receiver.accepted.length;
    receiver.mode = 'fail';
    await send(deliveriesFor('restart', 4));
    await eventually(() => receiver.refused > 0, 10_000, 'a refused delivery');
    await ratchet.stop();
    receiver.mode = 'ok';
    ratchet = await start();

    const expected = await stateChangesInStream('restart');
    await eventually(() => ofPrefix(receiver.applied(), 'restart').length >= expected.length, 60_000, 'delivery after the restart');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const applied = ofPrefix(receiver.applied(), 'restart');
    expect(applied.map((d) => d.id).sort()).toEqual([...expected].sort());
    expectOrderedChains(applied);
    // Nothing delivered before the restart came again (checkpoints and the ledger).
    expect(receiver.accepted.slice(before).filter((d) => !d.body.data.name.includes('/restart-'))).toEqual([]);
    expect(new Set(ofPrefix(receiver.accepted, 'restart').map((d) => d.id)).size).toBe(ofPrefix(receiver.accepted, 'restart').length);
  });
});

function shuffle<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}
