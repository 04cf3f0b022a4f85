/**
 * Dead letters of the effects path, whole: what could not be delivered, kept
 * 30 days with everything needed to look at it or deliver it later.
 *
 * - A transition whose retries ran out (or whose receiver answered 410) is
 *   kept with its outbound body, idempotency key, last error and attempt
 *   count. Later versions of the same operation are parked behind
 *   it (`waiting-behind`): order is never silently broken. `redrive` re-queues
 *   an operation's letters in version order.
 * - A stream record that cannot be decoded is parked at once with its raw
 *   image: retrying cannot decode it, and it must hold up nothing.
 */
import type { Transition } from './transition.ts';

export type DeadLetterReason = 'retries-exhausted' | 'gone' | 'waiting-behind';

export interface DeadLetter {
  name: string;
  version: number;
  idempotencyKey: string;
  reason: DeadLetterReason;
  transition: Transition;
  /** The outbound body, as it was (and will be) sent. */
  body: string;
  /** The stream record, as JSON (letters written before 0.2 only: redrive now puts back the transition). */
  record?: string;
  lastError: string;
  attempts: number;
  firstAttemptAt: string;
  deadLetteredAt: string;
  /** `redriving` once re-queued: it no longer holds later versions back. */
  status: 'dead' | 'redriving';
}

/** What could not be read, as the queue had it: where it sat, whose it was when that is known, and the raw thing. */
export interface Undecodable {
  sequence: string;
  name: string | null;
  raw: unknown;
}

export interface DeadLetters {
  parkUndecodable(undecodable: Undecodable, reason: string): Promise<void>;
  put(letter: DeadLetter): Promise<void>;
  /** True when an earlier version of `name` is dead (not being re-driven): this one must wait behind it. */
  holdsBack(name: string, version: number): Promise<boolean>;
  remove(name: string, version: number): Promise<void>;
  markRedriving(name: string, version: number): Promise<void>;
  /** Every transition dead letter, by operation and version (undecodable records are listed apart). */
  list(): Promise<DeadLetter[]>;
  listUndecodable(): Promise<Array<{ sequence: string; name: string | null; reason: string; raw: string }>>;
}

export const UNDECODABLE = '#undecodable';
export const DEAD_LETTER_RETENTION_SECONDS = 30 * 24 * 3600;

/** The sort key of a transition's letter: versions in order as strings. */
export const entryOf = (version: number) => `v${String(version).padStart(12, '0')}`;
