/**
 * What the SQL engines (SQLite, PostgreSQL) share of their operations table:
 * a row's view and poll state, an event's decision, and the lists' opaque page
 * cursors. Their tables have the same columns; each engine keeps its own SQL.
 */

import { type Decision, InvalidCursorError, type OperationView, type PollState } from '../../app/ports.ts';
import { type DiscardReason, type OperationEvent, type OperationRecord, storedRecord } from '../../core/reducer.ts';

/** Decisions kept per operation, at most, on either engine (and no older than DECISION_RETENTION_DAYS). */
export const DECISIONS_KEPT = 200;

/** Fixed words (states, write kinds) as an SQL list of string literals, for `IN (…)`: never a value from outside. */
export const sqlList = (words: readonly string[]): string => words.map((word) => `'${word}'`).join(', ');
export const DECISION_RETENTION_DAYS = 30;

/** An operations row: the record as the JSON text the application wrote, and its polling columns. */
export interface OperationRow {
  name: string;
  record: string;
  recorded_at: string;
  next_poll_at: string | null;
  unchanged_polls: number;
  failed_polls: number;
  not_found_polls: number;
  poll_note: string | null;
}

export function decisionOf(
  event: OperationEvent,
  at: string,
  verdict: { verdict: 'applied'; version: number } | { verdict: 'discarded'; reason: DiscardReason },
): Decision {
  return {
    at,
    source: event.source,
    eventId: event.eventId ?? null,
    state: event.state,
    updateTime: event.updateTime ?? null,
    ...verdict,
    ...(event.scheme && { scheme: event.scheme }),
  };
}

/** The decision of a write the store was handed whole (`write(next, expectedVersion)`): applied, as the record says. */
export function appliedDecisionOf(next: OperationRecord): Decision {
  return {
    at: next.recordedAt,
    source: next.source,
    eventId: next.eventId,
    state: next.state,
    updateTime: next.updateTime,
    verdict: 'applied',
    version: next.version,
  };
}

export function pollOf(row: OperationRow): PollState {
  return {
    nextPollAt: row.next_poll_at as string,
    unchangedPolls: row.unchanged_polls,
    failedPolls: row.failed_polls,
    notFoundPolls: row.not_found_polls,
  };
}

export function viewOf(row: OperationRow): OperationView {
  return {
    ...storedRecord(JSON.parse(row.record) as OperationRecord),
    polling: { nextPollAt: row.next_poll_at, failedPolls: row.failed_polls, notFoundPolls: row.not_found_polls, note: row.poll_note },
  };
}

/**
 * A page's opaque cursor: the last row's (time, key), read back by pageKeyOf;
 * the unprocessable list's carry its name first, so neither list takes the other's.
 */
export function pageCursorOf(time: string, key: string, list?: 'unprocessable'): string {
  return Buffer.from(JSON.stringify(list ? [list, time, key] : [time, key])).toString('base64url');
}

/**
 * A page of rows read with `LIMIT limit + 1`: the first `limit`, and the
 * cursor after the last of them (its time and key) when there was more.
 */
export function pageOf<R>(
  rows: R[],
  limit: number,
  keyOf: (row: R) => [string, string],
  list?: 'unprocessable',
): { taken: R[]; nextCursor?: string } {
  const taken = rows.slice(0, limit);
  const last = taken.at(-1);
  return { taken, ...(rows.length > limit && last && { nextCursor: pageCursorOf(...keyOf(last), list) }) };
}

/** The (time, key) of a cursor pageCursorOf made; anything else is refused before a query. */
export function pageKeyOf(cursor: string, list?: 'unprocessable'): [string, string] {
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString());
  } catch {
    throw new InvalidCursorError('cursor is not one this API handed out');
  }
  const parts = list ? 3 : 2;
  if (!Array.isArray(key) || key.length !== parts || !key.every((part) => typeof part === 'string') || (list && key[0] !== list)) {
    throw new InvalidCursorError('cursor is not one this API handed out');
  }
  return key.slice(-2) as [string, string];
}
