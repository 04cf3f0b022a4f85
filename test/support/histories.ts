/**
 * fast-check arbitraries for operation histories: a true timeline of states at
 * increasing times, observed (by webhooks and polls) any number of times, with
 * times written in any precision and offset, or without a time at all.
 *
 * Expectations are computed here from integer nanoseconds, independently of
 * the code under test.
 */
import fc from 'fast-check';
import type { OperationState } from '../../core/lifecycle.ts';
import type { OperationEvent } from '../../core/reducer.ts';

/** Ranks written out independently of lifecycle.ts, so the tests do not reuse the code's own table. */
export const RANK: Record<OperationState, number> = {
  PENDING: 0,
  RUNNING: 1,
  REQUIRES_ACTION: 1,
  SUCCEEDED: 2,
  FAILED: 2,
  CANCELLED: 2,
  EXPIRED: 2,
};
const BASE_SECONDS = 1_780_000_000; // 2026-05-28
const TERMINALS: OperationState[] = ['SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED'];

export interface Observation {
  event: OperationEvent;
  rank: number;
  /** Exact time in nanoseconds, or undefined when the observation carried no time. */
  nanos: bigint | undefined;
}

export interface History {
  name: string;
  observations: Observation[];
  /** The maximum under (rank, time): where every delivery order must end. */
  expected: { state: OperationState; updateTime: string | null };
}

/** Formats exact nanoseconds as RFC 3339 with `digits` fractional digits and an offset in minutes. */
export function formatTime(nanos: bigint, digits: 0 | 3 | 6 | 9, offsetMinutes: number): string {
  const seconds = nanos / 1_000_000_000n;
  const fraction = (nanos % 1_000_000_000n).toString().padStart(9, '0');
  const local = new Date(Number(seconds) * 1000 + offsetMinutes * 60_000).toISOString().slice(0, 19);
  const sign = offsetMinutes < 0 ? '-' : '+';
  const abs = Math.abs(offsetMinutes);
  const zone = offsetMinutes === 0 ? 'Z' : `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
  return `${local}${digits ? `.${fraction.slice(0, digits)}` : ''}${zone}`;
}

export function normalisedForm(nanos: bigint): string {
  return formatTime(nanos, 9, 0);
}

/** Fewest fractional digits that still write `nanos` exactly. */
function digitsNeeded(nanos: bigint): 0 | 3 | 6 | 9 {
  const fraction = nanos % 1_000_000_000n;
  if (fraction === 0n) return 0;
  if (fraction % 1_000_000n === 0n) return 3;
  return fraction % 1_000n === 0n ? 6 : 9;
}

const fractionArb = fc.oneof(
  fc.constant(0n),
  fc.integer({ min: 0, max: 999 }).map((ms) => BigInt(ms) * 1_000_000n),
  fc.integer({ min: 0, max: 999_999 }).map((us) => BigInt(us) * 1_000n),
  fc.bigInt({ min: 0n, max: 999_999_999n }),
);
const instantArb = fc
  .tuple(fc.integer({ min: 0, max: 3 * 86_400 }), fractionArb)
  .map(([s, f]) => BigInt(BASE_SECONDS + s) * 1_000_000_000n + f);

interface TimelineEntry {
  state: OperationState;
  nanos: bigint;
}

const timelineArb = fc
  .record({
    nonTerminal: fc.array(fc.constantFrom<OperationState>('PENDING', 'RUNNING', 'REQUIRES_ACTION'), { maxLength: 5 }),
    terminal: fc.option(fc.constantFrom(...TERMINALS), { nil: undefined }),
    // A terminal state may be observed at two times (the webhook's and the poll's).
    terminalTimes: fc.integer({ min: 1, max: 2 }),
    instants: fc.uniqueArray(instantArb, { minLength: 8, maxLength: 8 }),
  })
  .filter(({ nonTerminal, terminal }) => nonTerminal.length > 0 || terminal !== undefined)
  .map(({ nonTerminal, terminal, terminalTimes, instants }) => {
    const times = [...instants].sort((a, b) => (a < b ? -1 : 1));
    const states = [...nonTerminal].sort((a, b) => RANK[a] - RANK[b]);
    if (terminal) for (let i = 0; i < terminalTimes; i++) states.push(terminal);
    return states.map((state, i): TimelineEntry => ({ state, nanos: times[i] as bigint }));
  });

export function historyArb(name: string): fc.Arbitrary<History> {
  return timelineArb.chain((timeline) => {
    const observationArb = fc
      .record({
        entry: fc.constantFrom(...timeline),
        extraDigits: fc.integer({ min: 0, max: 3 }),
        offsetMinutes: fc.constantFrom(0, 0, 60, -300, 330, -90),
        timed: fc.boolean(),
        source: fc.constantFrom<'webhook' | 'poll'>('webhook', 'poll'),
      })
      .map(({ entry, extraDigits, offsetMinutes, timed, source }): Observation => {
        // Without a time, two different states of one rank cannot be told apart: only drop the time where the rank has one state.
        const ambiguous = timeline.some((other) => RANK[other.state] === RANK[entry.state] && other.state !== entry.state);
        const withTime = timed || ambiguous;
        const digits = Math.min(9, digitsNeeded(entry.nanos) + 3 * extraDigits) as 0 | 3 | 6 | 9;
        return {
          rank: RANK[entry.state],
          nanos: withTime ? entry.nanos : undefined,
          event: {
            name,
            kind: 'batch',
            state: entry.state,
            providerState: `JOB_STATE_${entry.state}`,
            source,
            ...(withTime && { updateTime: formatTime(entry.nanos, digits, offsetMinutes) }),
          },
        };
      });
    return fc.array(observationArb, { minLength: 1, maxLength: 12 }).map((observations) => ({
      name,
      observations,
      expected: expectedFinal(observations),
    }));
  });
}

/** True when `a` is later than `b` under (rank, time), a missing time being earliest. */
export function isAfter(a: { rank: number; nanos: bigint | undefined }, b: { rank: number; nanos: bigint | undefined }): boolean {
  if (a.rank !== b.rank) return a.rank > b.rank;
  if (a.nanos === undefined) return false;
  return b.nanos === undefined || a.nanos > b.nanos;
}

function expectedFinal(observations: Observation[]): History['expected'] {
  let best = observations[0] as Observation;
  for (const o of observations) if (isAfter(o, best)) best = o;
  return { state: best.event.state, updateTime: best.nanos === undefined ? null : normalisedForm(best.nanos) };
}

/** Distinct (rank, time) keys among the observations: the most applied writes any order can produce. */
export function distinctKeys(observations: Observation[]): number {
  return new Set(observations.map((o) => `${o.rank}|${o.nanos ?? '-'}`)).size;
}
