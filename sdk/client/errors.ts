/** The client's errors: the API's error codes, and the client's own. */
import type { Failure } from '../../core/failures.ts';
import { networkCodeOf } from '../../core/network.ts';
import type { OperationView } from '../../core/views.ts';

/**
 * The API's error codes, and the client's own: `timeout` (waitFor ran out of
 * time), `unreachable` (see waitFor), `invalid-argument` (an option no call
 * can honour, thrown at once), `polling-stopped` (waitFor: reconcile
 * stopped polling the job for good; `not-found` when Gemini no longer knows
 * it), `network`, `unexpected-response`,
 * `invalid-url` (the client's `url` is not an http(s) URL) and
 * `missing-dependency` (SigV4 signing needs packages that are not installed).
 */
export type RatchetErrorCode =
  | Failure
  | 'timeout'
  | 'unreachable'
  | 'network'
  | 'unexpected-response'
  | 'invalid-url'
  | 'missing-dependency'
  | 'polling-stopped'
  | 'invalid-argument';

export class RatchetError extends Error {
  override name = 'RatchetError';
  constructor(
    readonly code: RatchetErrorCode,
    message: string,
    /** The HTTP status, when the API answered. */
    readonly status?: number,
    /** The operation as last read, for `timeout`, `unreachable`, `not-found` and `polling-stopped`. */
    readonly operation?: OperationView,
    /** What failed underneath: for `network`, the error fetch threw (its `code`, e.g. ECONNREFUSED, is `causeCode`). */
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** The system error code under a `network` error (`ECONNREFUSED`, `ENOTFOUND`, `ETIMEDOUT`, …). */
  get causeCode(): string | undefined {
    return networkCodeOf(this.cause);
  }
}
