/**
 * What the API answers about an operation, shared by the server and the
 * client: its record with reconcile's polling status, and its history's
 * entries. Types only.
 */
import type { OperationRecord } from './reducer.ts';

/** What reconcile knows of an open operation's polling, for the API (never part of the reducer's record). */
export interface PollingStatus {
  /** When reconcile polls next; null once polling stopped (terminal, or `note` says why). */
  nextPollAt: string | null;
  failedPolls: number;
  notFoundPolls: number;
  /** Why the last poll failed or polling stopped: `not-found`, `invalid-name`, `unknown-state:<raw>`, `Gemini answered 429`, … */
  note: string | null;
}

export type OperationView = OperationRecord & { polling: PollingStatus };

/** One applied write of an operation, as its history keeps it. */
export type HistoryEntry = Pick<
  OperationRecord,
  'version' | 'state' | 'previousState' | 'stateChanged' | 'source' | 'eventId' | 'updateTime' | 'recordedAt'
>;
