/**
 * Round trips to PostgreSQL, counted at a TCP proxy in front of the real
 * server (test/support/pg-proxy.ts): a webhook is one statement, whether it
 * creates an operation, moves it on, or is a redelivery; a burst of webhooks
 * for one operation costs fewer statements than webhooks; effects are
 * claimed and settled in batches; a poll's outcome and its next poll time
 * are one statement. A change that adds a round trip to these
 * paths fails here, with the statements it cost listed.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { ingest } from '../../app/ingest.ts';
import { applyEvent, type OperationEvent } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import type { Postgres } from '../../engines/postgres/database.ts';
import { openPostgres, openPostgresEngine } from '../../engines/postgres/index.ts';
import { Writes } from '../../engines/postgres/one-write.ts';
import { createRatchet, type Ratchet } from '../../local/library.ts';
import { batchStorm } from '../support/batch-storm.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type PgProxy, startPgProxy } from '../support/pg-proxy.ts';
import { Receiver } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

const secret = newSecret();
const TOKEN = 'round-trips-token-0123456789abcdef';
let proxy: PgProxy;
const cleanup: Array<() => unknown> = [];

beforeAll(async () => {
  const url = new URL(inject('postgresUrl'));
  proxy = await startPgProxy({ host: url.hostname, port: Number(url.port) });
  cleanup.push(() => proxy.stop());
});
afterAll(async () => {
  for (const step of cleanup.reverse()) await step();
});

const at = (second: number) => `2026-11-30T10:00:${String(second).padStart(2, '0')}Z`;

function webhook(type: string, id: string, second: number, messageId?: string): Request {
  const { body, headers } = signedDelivery(secret, envelope(type, { id, update_time: at(second) }, at(second)), { id: messageId });
  return new Request('http://127.0.0.1/webhooks/gemini', { method: 'POST', headers, body });
}

/** The statements `work` cost, NOTIFY (sent after the answer, at most every few ms) left aside. */
async function statementsOf(work: () => Promise<unknown>): Promise<string[]> {
  proxy.reset();
  await work();
  return proxy.exchanges().filter((statement) => !statement.includes('pg_notify'));
}

describe('round trips to PostgreSQL', () => {
  let ratchet: Ratchet;
  beforeAll(async () => {
    ratchet = createRatchet({
      databaseUrl: proxy.urlFor(inject('postgresUrl')),
      schema: `round_trips_${Date.now().toString(36)}`,
      webhookSigningSecrets: secret,
      apiToken: TOKEN,
      env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL' },
    });
    cleanup.push(() => ratchet.close());
    // Opened, migrated, and a connection in the pool.
    expect((await ratchet.fetch(webhook('interaction.requires_action', 'interactions/warm', 1))).status).toBe(200);
  });

  it('a webhook is one statement: a new operation, its next state, and a redelivery', async () => {
    const name = 'interactions/one';
    const first = webhook('interaction.requires_action', name, 1, 'msg_one_1');
    const steps = [
      ['new', first],
      ['moved on', webhook('interaction.completed', name, 2)],
      ['redelivered', first],
      ['stale', webhook('interaction.requires_action', name, 3)],
    ] as const;
    for (const [step, request] of steps) {
      let status = 0;
      const statements = await statementsOf(async () => {
        status = (await ratchet.fetch(request.clone())).status;
      });
      expect(status, step).toBe(200);
      expect(statements, `${step}: ${statements.join(' | ')}`).toHaveLength(1);
    }
    const history = (await (
      await ratchet.fetch(new Request(`http://127.0.0.1/operations/${name}/history`, { headers: { authorization: `Bearer ${TOKEN}` } }))
    ).json()) as { history: Array<{ state: string }> };
    expect(history.history.map((entry) => entry.state)).toEqual(['REQUIRES_ACTION', 'SUCCEEDED']);
  });

  it('webhooks for many operations at once share statements, and every one is written once', async () => {
    const names = Array.from({ length: 48 }, (_, i) => `interactions/many-${i}`);
    const requests = names.map((name) => webhook('interaction.requires_action', name, 1));
    const statements = await statementsOf(() => Promise.all(requests.map((request) => ratchet.fetch(request))));
    expect(statements.length, statements.join(' | ')).toBeLessThan(names.length / 2);
    for (const name of names) {
      const answer = await ratchet.fetch(
        new Request(`http://127.0.0.1/operations/${name}/history`, { headers: { authorization: `Bearer ${TOKEN}` } }),
      );
      expect(((await answer.json()) as { history: unknown[] }).history, name).toHaveLength(1);
    }
  });

  it('webhooks for one operation at once share statements, and every one is written', async () => {
    const name = 'interactions/hot';
    const requests = Array.from({ length: 16 }, (_, i) => webhook('interaction.requires_action', name, i + 1));
    const statements = await statementsOf(() => Promise.all(requests.map((request) => ratchet.fetch(request))));
    expect(statements.length, statements.join(' | ')).toBeLessThan(requests.length / 2);
    const answer = await ratchet.fetch(
      new Request(`http://127.0.0.1/operations/${name}/decisions`, { headers: { authorization: `Bearer ${TOKEN}` } }),
    );
    const { decisions } = (await answer.json()) as { decisions: Array<{ verdict: string; version?: number }> };
    expect(decisions.map((decision) => decision.verdict)).toEqual(Array(16).fill('applied'));
    expect(decisions.map((decision) => decision.version)).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
  });

  it('effects are claimed and settled in batches: 24 effects cost under one statement each in all, each delivered once', async () => {
    const outbound = newSecret();
    const receiver = await new Receiver(outbound).start();
    cleanup.push(() => receiver.stop());
    const engine = await openPostgres({
      url: proxy.urlFor(inject('postgresUrl')),
      schema: `round_trips_effects_${Date.now().toString(36)}`,
      poolMax: 4,
      migrate: true,
      effectsLeaseMs: 5_000,
      work: {
        historyRetentionDays: 30,
        changesRetentionMs: 86_400_000,
        effects: {
          sink: { url: receiver.url, secret: outbound, timeoutMs: 5_000, connections: 8 },
          retry: { baseMs: 20, maxMs: 60, forSeconds: 60 },
        },
      },
      trackedExpiryDays: 7,
      logger: silentLogger,
    });
    cleanup.push(() => engine.close(false));
    // Eight operations, three state changes each: 24 effects, each operation's in version order.
    const names = Array.from({ length: 8 }, (_, i) => `batches/effects-${i}`);
    for (const event of batchStorm(names, 0, false)) await ingest(event, { store: engine.store });
    let settled = 0;
    const statements = await statementsOf(async () => {
      settled = (await engine.drainEffects?.(10_000)) ?? 0;
    });
    expect(settled).toBe(24);
    expect(
      receiver
        .applied()
        .map((delivery) => delivery.id)
        .sort(),
    ).toEqual(names.flatMap((name) => [1, 2, 3].map((version) => `${name}#${version}`)).sort());
    expect(receiver.accepted).toHaveLength(24);
    expect(statements.length, statements.join(' | ')).toBeLessThan(24);
    console.log(
      `24 effects: ${statements.length} statements (${statements.filter((s) => /WITH settled AS|_settle$/.test(s)).length} settles)`,
    );
  });

  it('a poll is one statement: its outcome and its next poll time together, whether it moved the job or not', async () => {
    const engine = await openPostgresEngine({
      url: proxy.urlFor(inject('postgresUrl')),
      schema: `round_trips_polls_${Date.now().toString(36)}`,
      historyRetentionDays: 30,
    });
    cleanup.push(() => engine.close());
    const name = 'batches/polled';
    const event = (state: 'PENDING' | 'RUNNING', second: number) => ({
      name,
      kind: 'batch' as const,
      state,
      providerState: `BATCH_STATE_${state}`,
      source: 'poll' as const,
      eventId: `poll-${second}`,
      updateTime: normalizeTime(`2026-12-06T00:00:0${second}Z`),
    });
    await ingest(event('PENDING', 1), { store: engine.store });
    const poll = async (state: 'PENDING' | 'RUNNING', second: number, nextPollAt: string) => {
      const [claimed] = await engine.store.claimDue('9999', 10, 60_000);
      expect(claimed?.record.name).toBe(name);
      let scheduled: boolean | undefined;
      const statements = await statementsOf(async () => {
        const result = await ingest(event(state, second), {
          store: engine.store,
          current: claimed?.record,
          pollNext: ({ stateChanged }) => ({
            unchangedPolls: stateChanged ? 0 : (claimed?.poll.unchangedPolls ?? 0) + 1,
            failedPolls: 0,
            notFoundPolls: 0,
            nextPollAt,
          }),
        });
        scheduled = result.scheduled;
      });
      expect(scheduled).toBe(true);
      expect(statements, statements.join(' | ')).toHaveLength(1);
      return (await engine.store.describe(name))?.polling;
    };
    // Moved on (a state change): the next poll at its new time, the unchanged count back to 0.
    expect(await poll('RUNNING', 2, '2026-12-06T01:00:00.000000Z')).toMatchObject({ nextPollAt: '2026-12-06T01:00:00.000000Z' });
    // The same again (discarded): its decision, and the next poll later, in the same statement.
    expect(await poll('RUNNING', 2, '2026-12-06T02:00:00.000000Z')).toMatchObject({ nextPollAt: '2026-12-06T02:00:00.000000Z' });
    const [row] = await engine.db.rows<{ unchanged_polls: number }>('SELECT unchanged_polls FROM {s}.operations WHERE name = $1', [name]);
    expect(row?.unchanged_polls).toBe(1);
    expect((await engine.store.decisions(name)).map((d) => d.verdict)).toEqual(['applied', 'applied', 'discarded']);
  });

  it('a statement the server refuses whole is sent again write by write: only the write it cannot take fails', async () => {
    const engine = await openPostgresEngine({
      url: inject('postgresUrl'),
      schema: `round_trips_refused_${Date.now().toString(36)}`,
      historyRetentionDays: 30,
    });
    cleanup.push(() => engine.close());
    // Fault injection: the server refuses any statement that carries the poisoned operation.
    const refusing = new Proxy(engine.db, {
      get(target, property, receiver) {
        if (property === 'prepared')
          return async (...args: Parameters<Postgres['prepared']>) => {
            if ((args[2][0] as string[]).includes('batches/poisoned'))
              throw Object.assign(new Error('invalid byte sequence for encoding "UTF8"'), { code: '22021' });
            return target.prepared(...args);
          };
        return Reflect.get(target, property, receiver);
      },
    });
    const writes = new Writes(refusing, { historyRetentionDays: 30, effects: false }, 1);
    const names = ['batches/fine-1', 'batches/poisoned', 'batches/fine-2', 'batches/fine-3'];
    const outcomes = await Promise.allSettled(
      names.map((name) => {
        const decision = applyEvent(undefined, batchStorm([name], 0, false)[0] as OperationEvent, '2026-12-06T00:00:00.000000Z');
        if (!decision.applied) throw new Error('a first event applies');
        return writes.write({ name, expected: undefined, versions: [decision.next], decisions: [] });
      }),
    );
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    for (const name of ['batches/fine-1', 'batches/fine-2', 'batches/fine-3']) expect((await engine.store.get(name))?.version).toBe(1);
    expect(await engine.store.get('batches/poisoned')).toBeUndefined();
  });
});
