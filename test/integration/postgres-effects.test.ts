/**
 * The PostgreSQL effects queue, two instances on one database delivering
 * through the real signed webhook sink to a real HTTP receiver: each state
 * change once, in version order per operation, whichever instance delivers;
 * a failing operation retried while the others go on; an effect claimed by an
 * instance that died in the middle of its delivery delivered by the other once
 * the claim's lease ends.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { deliverEffect } from '../../app/effects/deliver.ts';
import { WebhookSink } from '../../app/effects/webhook-sink.ts';
import { ingest } from '../../app/ingest.ts';
import type { OperationEvent } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { PostgresEffectsQueue, pendingEffects } from '../../engines/postgres/effects-queue.ts';
import { openPostgresEngine, type PostgresEngine } from '../../engines/postgres/index.ts';
import { newSecret } from '../support/deliveries.ts';
import { eventually, Receiver } from '../support/receiver.ts';
import { shuffle } from '../support/shuffle.ts';
import { silentLogger } from '../support/silent-logger.ts';

const url = inject('postgresUrl');
const secret = newSecret();
const cleanup: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

async function instance(
  schema: string,
  receiver: Receiver,
  leaseMs = 60_000,
): Promise<{ engine: PostgresEngine; queue: PostgresEffectsQueue }> {
  const engine = await openPostgresEngine({ url, schema, historyRetentionDays: 30, effects: true });
  const queue = new PostgresEffectsQueue(engine.db, { logger: silentLogger, leaseMs, pollMs: 20 });
  const sink = new WebhookSink(receiver.url, secret, { timeoutMs: 2_000 });
  const deps = {
    sinks: [sink],
    ledger: engine.ledger,
    deadLetters: engine.deadLetters,
    retry: { baseMs: 20, maxMs: 100, forSeconds: 60 },
    logger: silentLogger,
  };
  queue.start((effect) => deliverEffect(effect, deps));
  cleanup.push(
    () => engine.close(),
    () => queue.stop(),
  );
  return { engine, queue };
}

const STATES = [
  ['PENDING', 'BATCH_STATE_PENDING'],
  ['RUNNING', 'BATCH_STATE_RUNNING'],
  ['SUCCEEDED', 'BATCH_STATE_SUCCEEDED'],
] as const;
const eventOf = (name: string, i: number): OperationEvent => ({
  name,
  kind: 'batch',
  state: STATES[i]?.[0] as 'PENDING',
  providerState: STATES[i]?.[1] as string,
  source: 'webhook',
  eventId: `${name}-${i}`,
  updateTime: normalizeTime(`2026-12-06T00:00:0${i}Z`),
});

describe('the PostgreSQL effects queue', () => {
  it('delivers each state change once, in version order per operation, whichever of two instances takes it; a failing operation holds only itself', async () => {
    const receiver = await new Receiver(secret).start();
    cleanup.push(() => receiver.stop());
    // One operation's receiver fails for a while: its effects wait, the others go on.
    receiver.mode = 'fail';
    receiver.refuseOnly = (name) => name === 'batches/fx-3';
    const schema = `rt_fx_${Date.now().toString(36)}`;
    const [a, b] = [await instance(schema, receiver), await instance(schema, receiver)];
    const names = Array.from({ length: 24 }, (_, i) => `batches/fx-${i}`);
    // In order per operation (so each makes three state changes), interleaved across operations and instances.
    const events = shuffle(names, 3).flatMap((name) => [0, 1, 2].map((i) => eventOf(name, i)));
    await Promise.all(
      [a, b].map(async ({ engine, queue }, which) => {
        for (const event of events.filter((_, i) => i % 2 === which)) {
          await ingest(event, { store: engine.store });
          queue.wake();
        }
      }),
    );
    // Until the failing operation was refused at least once (a timer from the start raced the instances' start on a
    // loaded machine: the window could close before any attempt), then its receiver is back.
    await eventually(() => receiver.refused > 0, 20_000, 'a refused attempt');
    receiver.mode = 'ok';
    const changes = async () => {
      const rows = await a.engine.db.rows<{ name: string; version: number }>(
        "SELECT name, version FROM {s}.changes WHERE write_kind = 'state-change' ORDER BY name, version",
      );
      return rows.map((r) => `${r.name}#${r.version}`);
    };
    const expected = await changes();
    await eventually(() => receiver.applied().length >= expected.length, 30_000, 'every effect delivered');
    await eventually(async () => (await a.engine.db.rows('SELECT 1 FROM {s}.effects')).length === 0, 10_000, 'the queue empty');
    const applied = receiver.applied();
    expect(applied.map((d) => d.id).sort()).toEqual([...expected].sort());
    // Once each: no id accepted twice.
    expect(receiver.accepted.length).toBe(applied.length);
    for (const name of names) {
      const versions = applied.filter((d) => d.body.data.name === name).map((d) => d.body.data.version);
      expect(versions).toEqual([...versions].sort((x, y) => x - y));
    }
    expect(receiver.refused).toBeGreaterThan(0);
  });

  it('delivers an effect whose instance died in the middle of its delivery, once its claim lease ends', async () => {
    const receiver = await new Receiver(secret).start();
    cleanup.push(() => receiver.stop());
    const schema = `rt_fxl_${Date.now().toString(36)}`;
    const engine = await openPostgresEngine({ url, schema, historyRetentionDays: 30, effects: true });
    cleanup.push(() => engine.close());
    await ingest(eventOf('batches/orphan', 2), { store: engine.store });
    // An instance claims it for 300 ms, then is gone without settling it.
    const dead = new PostgresEffectsQueue(engine.db, { logger: silentLogger, leaseMs: 300 });
    expect((await dead.claim(10)).map((row) => row.name)).toEqual(['batches/orphan']);
    const { queue } = await instance(schema, receiver);
    const claimedAt = Date.now();
    await eventually(() => receiver.applied().length === 1, 10_000, 'the orphan delivered');
    expect(Date.now() - claimedAt).toBeGreaterThanOrEqual(200);
    expect(receiver.applied()[0]?.id).toBe('batches/orphan#1');
    expect(await queue.claim(10)).toEqual([]);
  });

  it('tells the console when a waiting effect is tried next, as this instance’s clock reads the database’s backoff', async () => {
    const schema = `rt_fxr_${Date.now().toString(36)}`;
    const engine = await openPostgresEngine({ url, schema, historyRetentionDays: 30, effects: true });
    cleanup.push(() => engine.close());
    await ingest(eventOf('batches/backing-off', 2), { store: engine.store });
    // Its last attempt failed: tried again a minute from now by the database's clock.
    await engine.db.run(
      `UPDATE {s}.effects SET attempts = 2, last_error = 'answered 503', next_attempt_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint + 60000`,
    );
    const [waiting] = await pendingEffects(engine.db, 'batches/backing-off');
    expect(waiting).toMatchObject({ version: 1, receiveCount: 2, lastError: 'answered 503' });
    expect(Math.abs((waiting?.retryAt ?? 0) - (Date.now() + 60_000))).toBeLessThan(2_000);
  });
});
