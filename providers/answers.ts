/**
 * What every provider's mapping reads the same way: a count, a time, and the
 * outcome of a terminal answer made of the fields the provider gave. Pure.
 * The APIs answer `null` for a field they have no value for; null is never
 * kept (the port's rule: each field of a result only when the provider gave it).
 */
import { isTerminal, type OperationState } from '../core/lifecycle.ts';
import type { OperationResult } from '../core/reducer.ts';
import { normalizeTime, timeFromDate } from '../core/time.ts';

/** A non-negative whole count as a number when exact (one past 2^53 kept as its text); anything else left out. */
export function countOf(value: unknown): number | string | undefined {
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0) return undefined;
    return Number.isSafeInteger(value) ? value : String(value);
  }
  if (typeof value !== 'string' || !/^\d{1,30}$/.test(value)) return undefined;
  return Number.isSafeInteger(Number(value)) ? Number(value) : value;
}

/** The sum of counts, when every one of them is an exact number; undefined when any is missing or text. */
export function sumOf(counts: Array<number | string | undefined>): number | undefined {
  if (counts.length === 0 || !counts.every((count): count is number => typeof count === 'number')) return undefined;
  const sum = counts.reduce((a, b) => a + b, 0);
  return Number.isSafeInteger(sum) ? sum : undefined;
}

/** A time given in unix seconds (OpenAI's `*_at`), normalised (millisecond precision); null or anything else: undefined. */
export function timeOfUnixSeconds(value: unknown): string | undefined {
  const seconds = typeof value === 'string' && /^\d{1,12}$/.test(value) ? Number(value) : value;
  if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds < 0) return undefined;
  return timeFromDate(new Date(Math.round(seconds * 1000)));
}

/** An RFC 3339 string or a Date (the AWS SDK's), normalised; null or absent: undefined. A string that is no time throws InvalidTimeError. */
export function timeOf(value: string | Date | null | undefined): string | undefined {
  if (value === null || value === undefined) return undefined;
  return value instanceof Date ? timeFromDate(value) : normalizeTime(value);
}

/** The newest of normalised times (they compare as strings), or undefined when none is given. */
export function newestOf(times: Array<string | undefined>): string | undefined {
  return times.reduce<string | undefined>(
    (newest, time) => (time !== undefined && (newest === undefined || time > newest) ? time : newest),
    undefined,
  );
}

/** A text the provider gave: a non-empty string, else undefined. */
export function textOf(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/** The object without its undefined fields; undefined when none is left. */
export function given<T extends object>(fields: T): T | undefined {
  const kept = Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
  return Object.keys(kept).length > 0 ? (kept as T) : undefined;
}

/**
 * The `result` of an answer at `state`: on a terminal state always an object (possibly empty: the outcome is
 * known, and a record waiting for it stops waiting), each field only when given; on an open state none.
 */
export function resultAt(state: OperationState, fields: OperationResult): { result?: OperationResult } {
  return isTerminal(state) ? { result: given(fields) ?? {} } : {};
}
