import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { sendsEffect, writeKindOf } from '../../core/change.ts';
import type { OperationState } from '../../core/lifecycle.ts';
import { applyEvent, type OperationEvent, type OperationRecord } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { formatTime, historyArb, isAfter, normalisedForm, RANK } from '../support/histories.ts';

const NOW = '2026-12-01T00:00:00.000000000Z';

/** Folds events through the reducer, normalising times at the edge as the webhook and reconcile do. */
function fold(events: OperationEvent[]): { final: OperationRecord | undefined; applied: OperationRecord[] } {
  let current: OperationRecord | undefined;
  const applied: OperationRecord[] = [];
  for (const event of events) {
    const decision = applyEvent(current, { ...event, updateTime: event.updateTime && normalizeTime(event.updateTime) }, NOW);
    if (decision.applied) {
      current = decision.next;
      applied.push(current);
    }
  }
  return { final: current, applied };
}

const deliveryOrders = <T>(items: T[]) => fc.shuffledSubarray(items, { minLength: items.length, maxLength: items.length });

describe('reducer properties', () => {
  it('every delivery order, with duplicates, ends at the maximum under (rank, time)', () => {
    fc.assert(
      fc.property(
        historyArb('batches/p').chain((history) =>
          fc.tuple(fc.constant(history), deliveryOrders(history.observations), deliveryOrders(history.observations)),
        ),
        ([history, orderA, orderB]) => {
          const a = fold(orderA.map((o) => o.event)).final;
          const b = fold(orderB.map((o) => o.event)).final;
          expect({ state: a?.state, updateTime: a?.updateTime }).toEqual(history.expected);
          expect({ state: b?.state, updateTime: b?.updateTime }).toEqual(history.expected);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('stored states never decrease: each applied write is strictly later under (rank, time), versions count up by one', () => {
    fc.assert(
      fc.property(
        historyArb('batches/p').chain((h) => deliveryOrders(h.observations)),
        (order) => {
          const { applied } = fold(order.map((o) => o.event));
          const key = (r: OperationRecord) => ({
            rank: RANK[r.state as OperationState],
            nanos: r.updateTime === null ? undefined : nanosOf(r.updateTime),
          });
          applied.forEach((record, i) => {
            expect(record.version).toBe(i + 1);
            const before = applied[i - 1];
            if (before) {
              expect(isAfter(key(record), key(before))).toBe(true);
              expect(record.previousState).toBe(before.state);
              expect(record.stateChanged).toBe(record.state !== before.state);
            }
          });
        },
      ),
      { numRuns: 500 },
    );
  });

  it('the first terminal state stored stays, whatever other terminal states arrive after it', () => {
    const terminal = fc.constantFrom<OperationState>('SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED');
    const event = fc.record({
      state: fc.constantFrom<OperationState>('PENDING', 'RUNNING', 'REQUIRES_ACTION', 'SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED'),
      seconds: fc.integer({ min: 0, max: 1000 }),
    });
    fc.assert(
      fc.property(fc.array(event, { maxLength: 6 }), terminal, fc.array(event, { maxLength: 10 }), (before, first, after) => {
        const toEvent = (state: OperationState, seconds: number): OperationEvent => ({
          name: 'batches/t',
          kind: 'batch',
          state,
          providerState: state,
          updateTime: formatTime(BigInt(1_780_000_000 + seconds) * 1_000_000_000n, 0, 0),
          source: 'poll',
        });
        const nonTerminalBefore = before.filter((e) => RANK[e.state] < 2).map((e) => toEvent(e.state, e.seconds));
        const { final } = fold([...nonTerminalBefore, toEvent(first, 500), ...after.map((e) => toEvent(e.state, e.seconds))]);
        expect(final?.state).toBe(first);
      }),
      { numRuns: 500 },
    );
  });

  it('a job ended by a bare webhook gets its outcome once, from a poll, after its end: its last effect carries the outcome', () => {
    // OpenAI's shape: polls carry the outcome, webhooks only the job's id (resultPending); any order, duplicates, and
    // the webhook's time before, at or after the terminal poll's.
    const at = (seconds: number) => formatTime(BigInt(1_780_000_000 + seconds) * 1_000_000_000n, 0, 0);
    const outcome = { requestCounts: { total: 3, succeeded: 2, failed: 1 }, outputFileId: 'file-out' };
    const poll = (state: OperationState, seconds: number, result?: typeof outcome): OperationEvent => ({
      name: 'openai/batches/batch_p',
      kind: 'openai-batch',
      state,
      providerState: state.toLowerCase(),
      updateTime: at(seconds),
      source: 'poll',
      ...(result && { result }),
    });
    const webhook = (seconds: number, id: string): OperationEvent => ({
      ...poll('SUCCEEDED', seconds),
      providerState: 'batch.completed',
      source: 'webhook',
      eventId: id,
      resultPending: true,
    });
    const events = fc.record({
      webhookAt: fc.integer({ min: 0, max: 400 }),
      secondWebhookAt: fc.option(fc.integer({ min: 0, max: 400 })),
      refreshAt: fc.option(fc.integer({ min: 301, max: 400 })),
    });
    fc.assert(
      fc.property(
        events.chain(({ webhookAt, secondWebhookAt, refreshAt }) => {
          const all = [
            poll('PENDING', 100),
            poll('RUNNING', 200),
            poll('SUCCEEDED', 300, outcome),
            webhook(webhookAt, 'evt_1'),
            webhook(webhookAt, 'evt_1'),
            ...(secondWebhookAt === null ? [] : [webhook(secondWebhookAt, 'evt_2')]),
            ...(refreshAt === null ? [] : [poll('SUCCEEDED', refreshAt, outcome)]),
          ];
          return deliveryOrders(all);
        }),
        (order) => {
          const { final, applied } = fold(order);
          expect(final).toMatchObject({ state: 'SUCCEEDED', result: outcome });
          expect(final?.resultPending).toBeUndefined();
          const kinds = applied.map(writeKindOf);
          const results = kinds.flatMap((kind, i) => (kind === 'result' ? [i] : []));
          expect(results.length).toBeLessThanOrEqual(1);
          const ended = applied.findIndex((record) => record.state === 'SUCCEEDED');
          // A result write only ever follows the write that ended the job bare, with only refreshes (no effect) between.
          const [result] = results;
          if (result !== undefined) {
            expect(result).toBeGreaterThan(ended);
            expect(applied[result - 1]?.resultPending).toBe(true);
            expect(kinds.slice(ended + 1, result).every((kind) => kind === 'refresh')).toBe(true);
          }
          const effects = applied.filter((record) => sendsEffect(writeKindOf(record)));
          expect(effects.at(-1)?.result).toEqual(outcome);
          expect(effects.filter((record) => record.state === 'SUCCEEDED' && record.stateChanged)).toHaveLength(1);
        },
      ),
      { numRuns: 1000 },
    );
  });

  it('normalised times order exactly as the instants they write', () => {
    // A day inside 1970-01-01 .. 9999-12-31, so any offset still writes a four-digit year.
    const instant = fc.bigInt({ min: 86_400n * 1_000_000_000n, max: (253_402_300_799n - 86_400n) * 1_000_000_000n });
    fc.assert(
      fc.property(instant, instant, fc.integer({ min: -23 * 60, max: 23 * 60 }), (a, b, offset) => {
        const na = normalizeTime(formatTime(a, 9, offset));
        const nb = normalizeTime(formatTime(b, 9, 0));
        expect(na).toBe(normalisedForm(a));
        expect(na < nb).toBe(a < b);
      }),
      { numRuns: 1000 },
    );
  });
});

function nanosOf(normalised: string): bigint {
  const seconds = BigInt(Date.parse(`${normalised.slice(0, 19)}Z`) / 1000);
  return seconds * 1_000_000_000n + BigInt(normalised.slice(20, 29));
}
