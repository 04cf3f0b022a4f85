/**
 * The Provider port: what Ratchet needs to know of a provider whose
 * long-running jobs it follows, in the domain's words. The reducer, the
 * stores, the effects, the feed and the clients know none of it; reconcile
 * and the webhook routes reach every provider only through this port.
 *
 * A provider is a folder (providers/<name>/):
 * - its kinds and their name grammar, in the contract's tables
 *   (core/lifecycle.ts `PROVIDER_KINDS`, core/names.ts `NAME_GRAMMAR`);
 * - a pure mapping from what its API answers (its SDK's objects, its webhook
 *   events) to an `OperationEvent`: state, the provider's own state word,
 *   update time, and on a terminal answer the outcome in `result`;
 * - a poller made with its official SDK, loaded only when something is to be
 *   polled: one job by name, and for discovery the key's recent batches;
 * - optionally, its webhook's parsing (the route verifies the signature).
 * A fifth provider is those, its entry in app/reconcile/providers.ts, and a run of
 * test/unit/provider-conformance.test.ts.
 */
import type { OperationKind } from '../core/lifecycle.ts';
import type { OperationEvent } from '../core/reducer.ts';

export type PollAnswer =
  | { kind: 'event'; event: OperationEvent }
  | { kind: 'not-found' }
  /** The provider answered a state word Ratchet has no mapping for (yet): the stored state stays, polling goes on. */
  | { kind: 'unknown-state'; raw: string }
  /**
   * Never sent, and never will be: the name is not a well-formed name of its kind (`invalid-name`), or it
   * names another project, location, resource or account than this deployment's (`other-project`).
   */
  | { kind: 'refused'; reason: string; note: 'invalid-name' | 'other-project' };

/** A webhook delivery, authentic, that can never be read into an event (kept as unprocessable). */
export class MalformedEventError extends Error {
  override name = 'MalformedEventError';
}

/** What a provider's webhook delivery says: an event, or a type Ratchet does not follow (`ignored`, noted). */
export type WebhookMapping = { kind: 'event'; event: OperationEvent } | { kind: 'ignored'; type: string };

/** Anything but an answer, a 404 or a refusal: reconcile backs the job off and polls it again. */
export class PollFailedError extends Error {
  override name = 'PollFailedError';
  constructor(
    message: string,
    readonly status?: number,
    /** A 429's `Retry-After`, in seconds: the credential is left alone that long. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
  }
}

/** The provider answered a state word Ratchet has no mapping for: the mapping throws it, the poller answers `unknown-state`. */
export class UnknownProviderStateError extends Error {
  override name = 'UnknownProviderStateError';
  constructor(
    readonly raw: string,
    message = `unknown provider state ${JSON.stringify(raw)}`,
  ) {
    super(message);
  }
}

/** One job to poll: its name, kind and the label of the key it is polled with (none: the provider's default key). */
export interface PollTarget {
  name: string;
  kind: OperationKind;
  credential?: string;
}

/** Polls one provider's jobs. */
export interface ProviderPoller {
  /** Throws PollFailedError for anything but an answer, a 404 or a refusal. */
  poll(operation: PollTarget): Promise<PollAnswer>;
  /**
   * Discovery: one page of the batches a key created, newest first. Absent where the provider lists nothing
   * Ratchet adopts.
   */
  listBatches?(page: { pageSize: number; pageToken?: string; credential?: string }): Promise<{
    batches: ListedBatch[];
    nextPageToken?: string;
  }>;
  /** The labels of its keys ('' for a single key), for discovery and the health answer. */
  readonly labels: string[];
}

/** One batch as a listing shows it: its name and creation time, and its event (mapped when read: it may throw). */
export interface ListedBatch {
  name: string;
  /** RFC 3339. */
  createTime?: string;
  /** The event its listing shows (source `poll`); throws UnknownProviderStateError or InvalidTimeError where it cannot be read. */
  event(): OperationEvent;
}

/** Where a poller notes how the provider answered each key (by label, never the key): the console and /healthz read it. */
export interface KeyHealth {
  accepted(label: string): void;
  refused(label: string, status: number): void;
}

/** An API key by its label ('' for a single key). */
export interface LabelledKey {
  label: string;
  apiKey: string;
}
