/** The persistence port: everything ingest and the API need from storage. */
import type { OperationKind, OperationState, ProviderName } from '../core/lifecycle.ts';
import type { OverdueLimits } from '../core/overdue.ts';
import type { DiscardReason, EventSource, OperationEvent, OperationRecord } from '../core/reducer.ts';

/**
 * The store refused a value and will refuse it again (DynamoDB's
 * ValidationException and its kind): retrying cannot help. Every other store
 * error means "try again" (throttling, network, 5xx, timeouts).
 */
export class StoreRejectedError extends Error {
  override name = 'StoreRejectedError';
}

export type WriteOutcome = { ok: true } | { ok: false; current: OperationRecord | undefined };

/**
 * An event applied, or not: refused, the stored record it was judged against
 * (the reducer names the discard reason from it).
 */
export type ApplyOutcome = ({ ok: true; record: OperationRecord } | { ok: false; current: OperationRecord | undefined }) & {
  /** The poll's next time was written with it (`pollNext`): the caller schedules nothing more. */
  scheduled?: boolean;
};

/**
 * A poll's next time, from whether its outcome changed the state: the columns
 * `schedulePoll` would write after it. A store that can write them in the
 * same step as the outcome (PostgreSQL: one statement) does, and says so.
 */
export type PollNext = (outcome: { stateChanged: boolean }) => Omit<PollState, 'nextPollAt'> & { nextPollAt: string };

/** What the caller holds for a write: the record it read, and a poll's next time. */
export interface WriteHint {
  current?: OperationRecord;
  pollNext?: PollNext;
  /**
   * The W3C `traceparent` of the write's span (OpenTelemetry on): an engine
   * keeps it with the effect the write makes, so the effect's delivery, in
   * whatever process or instance, links back to the webhook's trace.
   */
  traceparent?: string;
}

/** The store's own attempts at a write ran out: others kept writing the same operation. The sender should retry. */
export class WriteContentionError extends Error {
  override name = 'WriteContentionError';
}

export interface OperationStore {
  /** A strongly consistent read. */
  get(name: string): Promise<OperationRecord | undefined>;
  /**
   * Writes `next` only if the stored version is still `expectedVersion`
   * (`undefined`: only if nothing is stored). On a lost race, returns the
   * winning record without another read.
   */
  write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome>;
  /**
   * Applies `event` at `now` if and only if the reducer (`applyEvent`) applies
   * it against the stored record, in one atomic step with its change (the
   * change log, and what is derived from it). Refused: the record it was
   * judged against. `current` is the record as the caller last saw it, a hint
   * an engine may use to write in one request (DynamoDB picks its compiled
   * write's variant by it); every engine decides against what is stored. How
   * each engine does it is its own (one transaction on SQLite and PostgreSQL,
   * one conditional request on DynamoDB); WriteContentionError when its own
   * retries run out.
   */
  apply(event: OperationEvent, now: string, hint?: WriteHint): Promise<ApplyOutcome>;
  /**
   * Where a store keeps decisions (the embedded engine): an event ingest
   * discarded without asking the store (`hint.current`, the record at hand, already refused it).
   */
  noteDiscard?(event: OperationEvent, reason: DiscardReason, now: string, hint?: WriteHint): Promise<{ scheduled?: boolean } | undefined>;
}

/**
 * One event's fate, kept per operation by the embedded engine (in AWS each is a
 * structured log line): applied with the version it made, discarded with the
 * reducer's reason, or (a delivery signed by a JWT only, whose body is not
 * signed) `verifying-by-poll`: it asked for a poll, whose decision follows.
 */
export interface Decision {
  at: string;
  source: EventSource;
  eventId: string | null;
  state: OperationState | null;
  updateTime: string | null;
  verdict: 'applied' | 'discarded' | 'verifying-by-poll';
  version?: number;
  reason?: DiscardReason;
  /** Webhooks: how the delivery was signed. */
  scheme?: string;
}

export interface DecisionLog {
  /** Oldest first; the last 200 and at most 30 days. */
  decisions(name: string): Promise<Decision[]>;
  /** A decision no write made (a JWT-only delivery's request for a poll). */
  note?(name: string, decision: Decision): Promise<void>;
}

/** A verified delivery Ratchet does not map to an operation (Gemini's ping, a future event type). */
export interface UnmappedDelivery {
  type: string;
  webhookId: string;
  receivedAt: string;
}

/**
 * Where the API notes the last verified delivery it did not map, so a setup
 * tool (`npm run connect`) can see Gemini's ping arrive. Operations are untouched.
 */
export interface DeliveryReceipts {
  recordUnmapped(delivery: UnmappedDelivery): Promise<void>;
  /** The last one noted, and how many were noted in all. */
  lastUnmapped(): Promise<(UnmappedDelivery & { received: number }) | undefined>;
}

/** Why an authentic delivery can never be used, whatever a retry brings. */
export const UNPROCESSABLE_REASONS = ['not-json', 'malformed-event', 'invalid-time', 'invalid-name', 'unstorable'] as const;
export type UnprocessableReason = (typeof UNPROCESSABLE_REASONS)[number];

/**
 * An authentic delivery (its signature verified) that no retry can make
 * usable: answered 200 all the same (Gemini retries every other answer for a
 * day, then switches the webhook off), and kept here for the operator.
 */
export interface UnprocessableDelivery {
  outcome: 'unprocessable';
  receivedAt: string;
  webhookId: string;
  /** The envelope's `type`, when the body had one. */
  type: string | null;
  reason: UnprocessableReason;
  /** What was wrong, in words. */
  detail: string;
  /** How the delivery was signed (`hmac`, `ed25519`, `jwt`). */
  scheme: string;
  /** The first 4 KiB of the body, as sent. */
  body: string;
}

/** Unprocessable deliveries, kept 30 days: `GET /decisions?outcome=unprocessable`, newest first. */
export interface UnprocessableLog {
  /** Once per webhook-id: a redelivery of the same one replaces it. */
  recordUnprocessable(delivery: UnprocessableDelivery): Promise<void>;
  /** Throws InvalidCursorError for a cursor this store did not hand out. */
  listUnprocessable(page: { limit: number; cursor?: string }): Promise<{ decisions: UnprocessableDelivery[]; nextCursor?: string }>;
}

/** Reconcile's view of an open operation: when to poll it next and how it went so far. */
export interface PollState {
  nextPollAt: string;
  /** Polls in a row that found nothing new (drives the backoff). */
  unchangedPolls: number;
  /** Polls in a row that failed (429, 5xx, timeouts, malformed answers). */
  failedPolls: number;
  /** Polls in a row answered 404. */
  notFoundPolls: number;
}

export interface PollCandidate {
  record: OperationRecord;
  poll: PollState;
}

import type { OperationView } from '../core/views.ts';

export type { OperationView, PollingStatus } from '../core/views.ts';

/**
 * The list's filters by effects: an effect the receiver refused at least once that waits to be tried again
 * (`retrying`), or one set aside (`dead-lettered`).
 */
export const EFFECTS_FILTERS = ['retrying', 'dead-lettered'] as const;
export type EffectsFilter = (typeof EFFECTS_FILTERS)[number];

/** A filter this store cannot serve (the effects filter in AWS, where the effects live in SQS). */
export class UnsupportedFilterError extends Error {
  override name = 'UnsupportedFilterError';
}

export interface ListFilter {
  state?: OperationState;
  kind?: OperationKind;
  /** Only this provider's jobs (its kinds). */
  provider?: ProviderName;
  /** Throws UnsupportedFilterError where the store cannot tell (see EFFECTS_FILTERS). */
  effects?: EffectsFilter;
  /** Only open jobs marked overdue (past their kind's limit, OVERDUE_AFTER). */
  overdue?: boolean;
  limit: number;
  /** Opaque, from the previous page's `nextCursor`. */
  cursor?: string;
}

export class InvalidCursorError extends Error {
  override name = 'InvalidCursorError';
}

/** The API's reads: one operation with its polling status, and the list, newest first. */
export interface OperationQueries {
  describe(name: string): Promise<OperationView | undefined>;
  /** Throws InvalidCursorError for a cursor this store did not hand out. */
  list(filter: ListFilter): Promise<{ operations: OperationView[]; nextCursor?: string }>;
}

/** Asks reconcile to poll one operation on its next run. */
export interface PollRequests {
  /**
   * Makes an open operation due at `now` (back in the open index if polling
   * had stopped, its poll counters reset); false when it is terminal or unknown.
   */
  pollNow(name: string, now: string): Promise<boolean>;
}

export interface PollSchedule {
  /**
   * Open operations whose next poll is due at `now`, earliest first, at most
   * `limit`, each claimed for `leaseMs`: no other process is handed it until
   * its schedulePoll, or the lease's end (a poller that died). Where one
   * process polls at a time (one SQLite file; reconcile's reserved
   * concurrency of 1 in AWS) the claim is that alone.
   */
  claimDue(now: string, limit: number, leaseMs?: number): Promise<PollCandidate[]>;
  /**
   * Sets the next poll (or, with `nextPollAt: null`, stops polling and records
   * why) if the record is still at `version`; false when it moved on.
   */
  schedulePoll(
    name: string,
    version: number,
    poll: Omit<PollState, 'nextPollAt'> & { nextPollAt: string | null; note?: string },
  ): Promise<boolean>;
}

/**
 * Where reconcile finds the jobs to mark overdue, whatever their poll schedule: from an index of the open jobs by
 * when they were tracked, so a job polled half an hour apart, or no longer polled at all, is found within a round of
 * its limit. A job is in it while it is observed (it has a state), open and not yet marked; marked, it leaves it.
 */
export interface OverdueWatch {
  /**
   * The jobs open past their kind's limit and not yet marked, oldest first within a kind, at most `limit`, judged by
   * the store's clock (`now` where one process or one scheduled function decides; the database's own time on
   * PostgreSQL, where instances' clocks may disagree): `at` is that clock's time, the mark's.
   */
  findOverdue(limits: OverdueLimits, now: string, limit: number): Promise<{ at: string; records: OperationRecord[] }>;
}

/** Whether the store takes writes now (`/healthz`): `ok`, or why not, in words that name no secret. */
export type StoreHealth = 'ok' | { unavailable: string };

/**
 * The console's sign-ins (sessions and one-time sign-in codes), each under a
 * key made from a digest of its secret, never the secret itself: in the
 * process on one machine, in the database where instances share one (so a
 * browser behind a round-robin front stays signed in).
 */
export interface SignInStore {
  put(key: string, value: string, expiresAtMs: number): Promise<void>;
  /** The value while it has not expired. */
  get(key: string, nowMs: number): Promise<string | undefined>;
  /** The value, removed in the same step: a one-time code is taken once, by one instance. */
  take(key: string, nowMs: number): Promise<string | undefined>;
  delete(key: string): Promise<void>;
}
