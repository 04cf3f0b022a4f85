/**
 * The engine conformance suite: what the application needs of an engine
 * (app/ports.ts), run against every engine in ENGINES (test/support/engines.ts:
 * SQLite on a real file, DynamoDB on moto). An engine is done when it passes.
 * Ingest's guarantees (any order, duplication or concurrency ends at the
 * maximum; the stored state never regresses: fast-check), the compare-and-set
 * write, the change log holding exactly the applied writes in version order,
 * the schedule (due jobs claimed so that two pollers never poll one at once),
 * the jobs open past their kind's overdue limit found by age whatever their
 * poll schedule, each until it is marked or ends (fast-check, on the store's
 * clock: the database's own on PostgreSQL),
 * receipts and unprocessable deliveries, history, the effects ledger and the
 * dead letters (in version order, held back behind an earlier one, redriven).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../app/effects/dead-letters.ts';
import { transitionOf } from '../../app/effects/transition.ts';
import { entryOf } from '../../app/history.ts';
import { ingest } from '../../app/ingest.ts';
import { isTerminal } from '../../core/lifecycle.ts';
import { DEFAULT_OVERDUE_AFTER, type OverdueLimits, overdueMark } from '../../core/overdue.ts';
import { type OperationRecord, trackedRecord } from '../../core/reducer.ts';
import { normalizeTime, timeFromDate } from '../../core/time.ts';
import { ENGINES, type StoreUnderTest } from '../support/engines.ts';
import { distinctKeys, type History, historyArb, RANK } from '../support/histories.ts';
import { shuffle } from '../support/shuffle.ts';

const OPERATIONS = 20;
const INGESTERS = 16;
const normalised = (event: History['observations'][number]['event']) => ({
  ...event,
  updateTime: event.updateTime && normalizeTime(event.updateTime),
});

describe.each(ENGINES)('the operation store on $label', (engine) => {
  let subject: StoreUnderTest;
  beforeAll(async () => {
    subject = await engine.open('contract');
  });
  afterAll(() => subject.close());

  it('concurrent, shuffled, duplicated deliveries end every operation at its maximum; the feed holds each applied write once, in order', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc
          .integer()
          .chain((seed) =>
            fc.tuple(fc.constant(seed), fc.tuple(...Array.from({ length: OPERATIONS }, (_, i) => historyArb(`batches/c-${seed}-${i}`)))),
          ),
        fc.integer({ min: 1, max: 3 }),
        async ([seed, histories], copies) => {
          run++;
          const renamed: History[] = histories.map((h) => {
            const name = `${h.name}-${run}`;
            return { ...h, name, observations: h.observations.map((o) => ({ ...o, event: { ...o.event, name } })) };
          });
          const deliveries = shuffle(
            renamed.flatMap((h) => Array.from({ length: copies }, () => h.observations.map((o) => o.event)).flat()),
            seed,
          );
          const applied = new Map<string, number>();
          let next = 0;
          await Promise.all(
            Array.from({ length: INGESTERS }, async () => {
              while (next < deliveries.length) {
                const event = deliveries[next++];
                if (!event) break;
                const result = await ingest(normalised(event), { store: subject.store });
                if (result.outcome === 'applied') applied.set(event.name, (applied.get(event.name) ?? 0) + 1);
              }
            }),
          );
          const changes = await subject.changes();
          for (const history of renamed) {
            const record = await subject.store.get(history.name);
            expect({ name: history.name, state: record?.state, updateTime: record?.updateTime }).toEqual({
              name: history.name,
              ...history.expected,
            });
            expect(record?.version).toBe(applied.get(history.name));
            expect(record?.version).toBeLessThanOrEqual(distinctKeys(history.observations));
            expect(changes.filter((c) => c.name === history.name).map((c) => c.version)).toEqual(
              Array.from({ length: applied.get(history.name) ?? 0 }, (_, i) => i + 1),
            );
          }
        },
      ),
      // Shrinking against a database is slow and rarely clearer: the seed replays a failure.
      { numRuns: 4, endOnFailure: true },
    );
  });

  it('never moves a stored operation backwards, delivery by delivery, whatever the order', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.integer(), historyArb('batches/monotone'), async (seed, history) => {
        const name = `batches/monotone-${++run}`;
        let before: OperationRecord | undefined;
        for (const { event } of shuffle(history.observations, seed)) {
          await ingest(normalised({ ...event, name }), { store: subject.store });
          const after = await subject.store.get(name);
          if (before?.state && after?.state) {
            const [was, is] = [RANK[before.state], RANK[after.state]];
            expect(is).toBeGreaterThanOrEqual(was);
            if (was === 2) expect(after.state).toBe(before.state);
            if (is === was) expect((after.updateTime ?? '') >= (before.updateTime ?? '')).toBe(true);
            expect(after.version).toBeGreaterThanOrEqual(before.version);
          }
          before = after;
        }
        expect({ state: before?.state, updateTime: before?.updateTime }).toEqual(history.expected);
      }),
      { numRuns: 15, endOnFailure: true },
    );
  });

  it('writes a record only on the version it was read at, and hands back the winner otherwise', async () => {
    const tracked = trackedRecord('batches/cas', 'batch', '2026-12-01T00:00:00.000000000Z');
    expect(await subject.store.write(tracked, undefined)).toEqual({ ok: true });
    const again = await subject.store.write({ ...tracked, recordedAt: '2026-12-01T00:00:01.000000000Z' }, undefined);
    expect(again).toEqual({ ok: false, current: tracked });
    expect((await subject.store.write({ ...tracked, version: 3 }, 2)).ok).toBe(false);
    expect(await subject.store.get('batches/cas')).toEqual(tracked);
    expect(await subject.store.get('batches/unknown')).toBeUndefined();
    expect(await subject.store.describe('batches/unknown')).toBeUndefined();
  });

  it('keeps open operations due for polling, moves them on schedule, stops and restarts them', async () => {
    const now = '2026-12-01T00:00:00.000000000Z';
    const later = '2026-12-01T01:00:00.000000000Z';
    const name = 'batches/poll-contract';
    await subject.store.write(trackedRecord(name, 'batch', now), undefined);
    const due = async (at: string) => (await subject.store.claimDue(at, 10_000)).find((candidate) => candidate.record.name === name);
    expect((await due(now))?.poll).toEqual({ nextPollAt: now, unchangedPolls: 0, failedPolls: 0, notFoundPolls: 0 });
    expect(await subject.store.schedulePoll(name, 1, { nextPollAt: later, unchangedPolls: 1, failedPolls: 2, notFoundPolls: 0 })).toBe(
      true,
    );
    expect(await due(now)).toBeUndefined();
    expect((await due(later))?.poll).toEqual({ nextPollAt: later, unchangedPolls: 1, failedPolls: 2, notFoundPolls: 0 });
    expect(await subject.store.schedulePoll(name, 7, { nextPollAt: now, unchangedPolls: 0, failedPolls: 0, notFoundPolls: 0 })).toBe(false);
    expect(
      await subject.store.schedulePoll(name, 1, {
        nextPollAt: null,
        unchangedPolls: 0,
        failedPolls: 0,
        notFoundPolls: 3,
        note: 'not-found',
      }),
    ).toBe(true);
    expect(await due(later)).toBeUndefined();
    expect((await subject.store.describe(name))?.polling).toEqual({
      nextPollAt: null,
      failedPolls: 0,
      notFoundPolls: 3,
      note: 'not-found',
    });
    expect(await subject.store.pollNow(name, now)).toBe(true);
    expect((await subject.store.describe(name))?.polling).toEqual({ nextPollAt: now, failedPolls: 0, notFoundPolls: 0, note: null });

    await ingest(
      { name, kind: 'batch', state: 'SUCCEEDED', providerState: 'JOB_STATE_SUCCEEDED', source: 'poll' },
      { store: subject.store },
    );
    expect(await due(later)).toBeUndefined();
    expect(await subject.store.pollNow(name, now)).toBe(false);
    expect(await subject.store.pollNow('batches/never-seen', now)).toBe(false);
  });

  it('keeps a job ended without its outcome due until a poll brings it, as a write of its own (writeKind result), then stops polling it', async () => {
    const name = 'openai/batches/batch_result_contract';
    // Written now (each store stamps its own time): looked for an hour on, each claim for a millisecond.
    const due = async () =>
      (await subject.store.claimDue(timeFromDate(new Date(Date.now() + 3_600_000)), 10_000, 1)).some(
        (candidate) => candidate.record.name === name,
      );
    const ended = await ingest(
      {
        name,
        kind: 'openai-batch',
        state: 'SUCCEEDED',
        providerState: 'batch.completed',
        updateTime: '2026-12-01T00:00:05.000000000Z',
        source: 'webhook',
        eventId: 'evt_contract',
        resultPending: true,
      },
      { store: subject.store },
    );
    expect(ended).toMatchObject({ outcome: 'applied', record: { provider: 'openai', resultPending: true, version: 1 } });
    expect(await due()).toBe(true);
    // A webhook's ask for the poll that brings it is taken (an ended job's is not, once its outcome came).
    expect(await subject.store.pollNow(name, timeFromDate(new Date()))).toBe(true);
    // The poll's time is older than the webhook's: the outcome applies all the same.
    const result = { requestCounts: { total: 2, succeeded: 2, failed: 0 }, outputFileId: 'file-x' };
    const polled = await ingest(
      {
        name,
        kind: 'openai-batch',
        state: 'SUCCEEDED',
        providerState: 'completed',
        updateTime: '2026-12-01T00:00:01.000000000Z',
        source: 'poll',
        result,
      },
      { store: subject.store },
    );
    expect(polled).toMatchObject({ outcome: 'applied', record: { version: 2, stateChanged: false, resultWrite: true, result } });
    const stored = await subject.store.get(name);
    expect(stored).toMatchObject({ provider: 'openai', updateTime: '2026-12-01T00:00:05.000000000Z', result });
    expect(stored?.resultPending).toBeUndefined();
    expect(await due()).toBe(false);
    expect(await subject.store.pollNow(name, timeFromDate(new Date()))).toBe(false);
    const again = await ingest(
      {
        name,
        kind: 'openai-batch',
        state: 'SUCCEEDED',
        providerState: 'completed',
        updateTime: '2026-12-01T00:00:01.000000000Z',
        source: 'poll',
        result,
      },
      { store: subject.store },
    );
    expect(again.outcome).toBe('discarded');
    expect((await subject.changes()).filter((change) => change.name === name).map((change) => change.version)).toEqual([1, 2]);
  });

  it('finds the jobs open past their kind’s limit and not yet marked, polled or not, until each is marked or ends (fast-check)', async () => {
    // Ages are this machine's time minus a margin of minutes from the limit: the database's clock (PostgreSQL) is the same one.
    const limits: OverdueLimits = { ...DEFAULT_OVERDUE_AFTER, interaction: 3_600, video: 1_800, batch: null };
    const STATES = [null, 'PENDING', 'RUNNING', 'REQUIRES_ACTION', 'SUCCEEDED', 'FAILED'] as const;
    let run = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.record({
            kind: fc.constantFrom('interaction' as const, 'video' as const, 'batch' as const),
            state: fc.constantFrom(...STATES),
            // Minutes past the kind's limit (negative: not yet), far from the boundary a round trip could cross.
            past: fc.constantFrom(-20, -5, 5, 20, 24 * 60),
            marked: fc.boolean(),
            polling: fc.constantFrom('due-later', 'stopped'),
          }),
          { minLength: 1, maxLength: 10 },
        ),
        async (jobs) => {
          run++;
          const names: string[] = [];
          const expected: string[] = [];
          for (const [i, job] of jobs.entries()) {
            const name = `${{ video: 'models/veo/operations', interaction: 'interactions', batch: 'batches' }[job.kind]}/age-${run}-${i}`;
            names.push(name);
            const limit = limits[job.kind] ?? 86_400;
            const createdAt = timeFromDate(new Date(Date.now() - limit * 1000 - job.past * 60_000));
            const record: OperationRecord = {
              ...trackedRecord(name, job.kind, createdAt),
              state: job.state,
              providerState: job.state,
              ...(job.marked && job.state !== null && { overdue: { at: createdAt, afterSeconds: limit } }),
            };
            expect((await subject.store.write(record, undefined)).ok).toBe(true);
            const later = timeFromDate(new Date(Date.now() + 3_600_000));
            if (!isTerminal(job.state))
              await subject.store.schedulePoll(name, 1, {
                nextPollAt: job.polling === 'stopped' ? null : later,
                unchangedPolls: 5,
                failedPolls: 0,
                notFoundPolls: 0,
              });
            const open = job.state !== null && !isTerminal(job.state);
            if (open && !job.marked && limits[job.kind] !== null && job.past > 0) expected.push(name);
          }
          const found = async () => {
            const { at, records } = await subject.store.findOverdue(limits, timeFromDate(new Date()), 1_000);
            expect(Math.abs(Date.parse(at) - Date.now())).toBeLessThan(60_000);
            return { at, records: records.filter((record) => names.includes(record.name)) };
          };
          const { at, records } = await found();
          expect(records.map((record) => record.name).sort()).toEqual([...expected].sort());
          // Each found with its stored version: the mark's conditional write takes it out of the index, once.
          const [first, second] = records;
          if (first) {
            const mark = overdueMark(first, limits, at) as OperationRecord;
            expect(mark).toBeDefined();
            const polling = (await subject.store.describe(first.name))?.polling;
            expect(await subject.store.write(mark, first.version)).toEqual({ ok: true });
            // Its schedule as it was: a job whose polling stopped stays stopped, one due later stays due then.
            expect((await subject.store.describe(first.name))?.polling).toEqual(polling);
            expect((await subject.store.list({ overdue: true, limit: 100 })).operations.map((o) => o.name)).toContain(first.name);
          }
          if (second)
            expect((await subject.store.write({ ...second, version: second.version + 1, state: 'SUCCEEDED' }, second.version)).ok).toBe(
              true,
            );
          const left = (await found()).records.map((record) => record.name).sort();
          expect(left).toEqual(expected.filter((name) => name !== first?.name && name !== second?.name).sort());
          if (second)
            expect((await subject.store.list({ overdue: true, limit: 100 })).operations.map((o) => o.name)).not.toContain(second.name);
        },
      ),
      { numRuns: 12, endOnFailure: true },
    );
  });

  it('notes the last delivery it could not map, and how many there were', async () => {
    await subject.store.recordUnmapped({ type: 'ping', webhookId: 'w1', receivedAt: '2026-12-01T00:00:00Z' });
    await subject.store.recordUnmapped({ type: 'ping', webhookId: 'w2', receivedAt: '2026-12-01T00:00:01Z' });
    expect(await subject.store.lastUnmapped()).toEqual({ type: 'ping', webhookId: 'w2', receivedAt: '2026-12-01T00:00:01Z', received: 2 });
  });

  it('keeps unprocessable deliveries once per webhook-id, lists them newest first in pages, and refuses a cursor of another list', async () => {
    const delivery = (webhookId: string, second: number) => ({
      outcome: 'unprocessable' as const,
      receivedAt: `2026-12-02T00:00:0${second}.000000000Z`,
      webhookId,
      type: 'batch.succeeded',
      reason: 'invalid-name' as const,
      detail: 'not an operation name',
      scheme: 'hmac',
      body: `{"id":"${webhookId}"}`,
    });
    for (const [id, second] of [
      ['u1', 1],
      ['u2', 2],
      ['u3', 3],
    ] as const)
      await subject.store.recordUnprocessable(delivery(id, second));
    await subject.store.recordUnprocessable(delivery('u1', 4)); // the same delivery again: kept once, at its latest time
    const first = await subject.store.listUnprocessable({ limit: 2 });
    expect(first.decisions.map((d) => d.webhookId)).toEqual(['u1', 'u3']);
    expect(first.decisions[0]).toEqual(delivery('u1', 4));
    const second = await subject.store.listUnprocessable({ limit: 2, cursor: first.nextCursor });
    expect(second.decisions.map((d) => d.webhookId)).toEqual(['u2']);
    expect(second.nextCursor).toBeUndefined();
    const operations = await subject.store.list({ limit: 1 });
    if (operations.nextCursor) await expect(subject.store.listUnprocessable({ limit: 1, cursor: operations.nextCursor })).rejects.toThrow();
    // Never an operation: the operations list does not show them.
    expect((await subject.store.list({ limit: 100 })).operations.map((o) => o.name)).not.toContain('u1');
  });

  it('hands each due job to one claim at a time: concurrent claims are disjoint, a lease that ends makes it due again', async () => {
    const now = '2026-12-03T00:00:00.000000000Z';
    const names = Array.from({ length: 12 }, (_, i) => `batches/claim-${i}`);
    for (const name of names) await subject.store.write(trackedRecord(name, 'batch', now), undefined);
    const mine = (candidates: Array<{ record: OperationRecord }>) =>
      candidates.map((c) => c.record.name).filter((name) => names.includes(name));
    // Four pollers at once, each asking for everything due, each for a minute.
    const claims = await Promise.all(Array.from({ length: 4 }, () => subject.store.claimDue(now, 10_000, 60_000)));
    const handed = claims.flatMap(mine);
    expect(handed.sort()).toEqual([...names].sort());
    expect(new Set(handed).size).toBe(handed.length);
    // While leased, nobody else is handed them; after the lease, they are due again.
    expect(mine(await subject.store.claimDue(now, 10_000, 60_000))).toEqual([]);
    const after = '2026-12-03T00:01:00.001000000Z';
    expect(mine(await subject.store.claimDue(after, 10_000, 60_000)).sort()).toEqual([...names].sort());
    // schedulePoll ends a claim with the next poll it sets.
    const [first] = names as [string];
    expect(await subject.store.schedulePoll(first, 1, { nextPollAt: after, unchangedPolls: 1, failedPolls: 0, notFoundPolls: 0 })).toBe(
      true,
    );
    expect(mine(await subject.store.claimDue(after, 10_000))).toEqual([first]);
  });

  it('keeps history once per version, in version order, whatever order and how often the writes come', async () => {
    const name = 'batches/history-conformance';
    const entries = [1, 2, 3, 4].map((version) =>
      entryOf({
        name,
        version,
        state: (['PENDING', 'RUNNING', 'RUNNING', 'SUCCEEDED'] as const)[version - 1],
        previousState: version === 1 ? null : 'PENDING',
        stateChanged: version !== 3,
        source: 'webhook',
        eventId: `e${version}`,
        updateTime: `2026-12-03T00:00:0${version}.000000000Z`,
        recordedAt: `2026-12-03T00:00:0${version}.500000000Z`,
      }),
    );
    for (const entry of shuffle([...entries, ...entries], 7)) await subject.history.record(name, entry);
    expect(await subject.history.list(name)).toEqual(entries);
    expect(await subject.history.list('batches/no-history')).toEqual([]);
  });

  it('delivers an effect once by the ledger: delivered stays delivered, per sink', async () => {
    const key = 'batches/ledger-conformance#1';
    expect(await subject.ledger.isDelivered('webhook', key)).toBe(false);
    await subject.ledger.markDelivered('webhook', key, { attempts: 2, earlierFailure: 'answered 503 Service Unavailable' });
    await subject.ledger.markDelivered('webhook', key);
    expect(await subject.ledger.isDelivered('webhook', key)).toBe(true);
    expect(await subject.ledger.isDelivered('eventbridge', key)).toBe(false);
  });

  it('keeps dead letters by operation in version order; an earlier dead one holds later ones back until redriven; skip drops one', async () => {
    const name = 'batches/dead-conformance';
    const letter = (version: number, reason: DeadLetter['reason']): DeadLetter => {
      const transition = transitionOf({
        ...trackedRecord(name, 'batch', '2026-12-03T00:00:00.000000000Z'),
        version,
        state: version === 3 ? 'SUCCEEDED' : 'RUNNING',
      });
      return {
        name,
        version,
        idempotencyKey: `${name}#${version}`,
        reason,
        transition,
        body: JSON.stringify({ data: transition }),
        lastError: reason === 'waiting-behind' ? 'waiting behind an earlier version' : 'answered 500 Internal Server Error',
        attempts: reason === 'waiting-behind' ? 0 : 5,
        firstAttemptAt: '2026-12-03T00:00:01.000000000Z',
        deadLetteredAt: '2026-12-03T01:00:00.000000000Z',
        status: 'dead',
      };
    };
    await subject.deadLetters.put(letter(3, 'waiting-behind'));
    await subject.deadLetters.put(letter(2, 'retries-exhausted'));
    const listed = (await subject.deadLetters.list()).filter((l) => l.name === name);
    expect(listed).toEqual([letter(2, 'retries-exhausted'), letter(3, 'waiting-behind')]);
    expect(await subject.deadLetters.holdsBack(name, 3)).toBe(true);
    expect(await subject.deadLetters.holdsBack(name, 2)).toBe(false);
    expect(await subject.deadLetters.holdsBack('batches/other', 9)).toBe(false);
    await subject.deadLetters.markRedriving(name, 2);
    expect(await subject.deadLetters.holdsBack(name, 4)).toBe(true); // version 3 is still dead
    await subject.deadLetters.remove(name, 2);
    await subject.deadLetters.remove(name, 3);
    expect((await subject.deadLetters.list()).filter((l) => l.name === name)).toEqual([]);
    expect(await subject.deadLetters.holdsBack(name, 4)).toBe(false);
    await subject.deadLetters.parkUndecodable({ sequence: '000123', name, raw: { not: 'a record' } }, 'no NewImage');
    expect((await subject.deadLetters.listUndecodable()).map((u) => [u.sequence, u.name, u.reason])).toContainEqual([
      '000123',
      name,
      'no NewImage',
    ]);
    expect((await subject.deadLetters.list()).filter((l) => l.name === name)).toEqual([]);
  });
});
