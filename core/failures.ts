/**
 * Every failure the API answers, and its status: one table to read, shared by
 * the server (which answers them) and the client (whose errors carry the
 * code). Pure.
 */

export const FAILURES = {
  'payload-too-large': 413,
  'unsupported-media-type': 415,
  /** A browser page from another origin: refused, so no web page can drive the runtime. */
  'foreign-origin': 403,
  'invalid-signature': 401,
  /** No API token, or a wrong one (the local runtime: every route but the webhook and /healthz). */
  unauthorized: 401,
  /** A Host this runtime does not serve (DNS rebinding, or PUBLIC_URL unset behind a proxy). */
  'misdirected-request': 421,
  /** Too many tracks (or polls asked by JWT-only deliveries) for one credential: Retry-After says when. */
  'rate-limited': 429,
  'malformed-request': 400,
  /** The store refused a value for good (e.g. DynamoDB's ValidationException): a retry would fail the same way. */
  unstorable: 400,
  'not-recorded': 503,
  /** No usable signing secret yet: Gemini retries for 24 h, so nothing is lost while setup finishes. */
  'not-configured': 503,
  /** Too many requests in flight (the local runtime's HTTP server, before the app): Retry-After says when. */
  overloaded: 503,
  /** The published keys for dynamic-webhook signatures cannot be fetched: the delivery cannot be judged now. */
  'keys-unavailable': 503,
  /** Inside an app, `fetch` after `close()`: this instance serves no more (another may, or the next one started). */
  closed: 503,
  'not-found': 404,
  /** A change-feed cursor the feed no longer holds (local runtime): the body names the oldest one still good. */
  'cursor-expired': 410,
  internal: 500,
} as const satisfies Record<string, number>;
export type Failure = keyof typeof FAILURES;

export function failureBody(failure: Failure, message: string): { error: Failure; message: string } {
  return { error: failure, message };
}

/** Every 503 says when to try again (`Retry-After`): nothing was recorded, and a second later may do. */
export const RETRY_AFTER_SECONDS = 1;

/** A failure as the HTTP answer every route gives it: its status from FAILURES, its JSON body (a 503 with Retry-After). */
export function failureResponse(failure: Failure, message: string): Response {
  const status = FAILURES[failure];
  return new Response(JSON.stringify(failureBody(failure, message)), {
    status,
    headers: { 'content-type': 'application/json', ...(status === 503 && { 'retry-after': String(RETRY_AFTER_SECONDS) }) },
  });
}
