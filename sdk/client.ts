/**
 * `ratchet/client`: an application's typed client for Ratchet's HTTP API,
 * the same against the local runtime (`npm start`; plain HTTP) and a deployed
 * stack (the `/operations` routes need IAM: requests are signed with SigV4
 * and the default AWS credential chain).
 *
 *   const ratchet = new RatchetClient({ url: process.env.RATCHET_URL, token: process.env.RATCHET_API_TOKEN });
 *   await ratchet.track('batches/123', { metadata: { order: 'A-17' } });
 *   const done = await ratchet.waitFor('batches/123', { until: 'terminal', timeoutMs: 3_600_000 });
 *
 * On one machine every route needs the API token: `token`, or
 * RATCHET_API_TOKEN from the environment.
 *
 * Errors are RatchetError, whose `code` is the API's error code. A 503 (the
 * store briefly unavailable), API Gateway's 429, 502 and 504, and a failed
 * connection are retried with backoff.
 */
import { changeOf, LONG_POLL_HEADER, type OperationChange } from '../core/change.ts';
import type { Failure } from '../core/failures.ts';
import { isTerminal, OPERATION_STATES, type OperationKind, type OperationState, rankOf } from '../core/lifecycle.ts';
import { networkCodeOf, networkFailureInWords } from '../core/network.ts';
import type { OperationRecord, OperationResult } from '../core/reducer.ts';
import type { HistoryEntry, OperationView } from '../core/views.ts';

export type { HistoryEntry, OperationChange, OperationKind, OperationRecord, OperationResult, OperationState, OperationView };

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

/** Signs one request; see `sigV4Signer`. */
export type RequestSigner = (request: {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string;
}) => Promise<Record<string, string>>;

export interface RatchetClientOptions {
  /** The API's base URL: `http://127.0.0.1:3000` locally, the stack's `ApiUrl` output when deployed. */
  url: string;
  /**
   * How requests are signed. Default: SigV4 with the default credential chain
   * when `url` is an `execute-api` host, none otherwise (the local runtime).
   */
  signer?: RequestSigner | 'none';
  /**
   * The API token of a Ratchet on one machine (`Authorization: Bearer`);
   * default RATCHET_API_TOKEN from the environment (its first, when it holds
   * several). Not sent to a deployed stack, whose routes are SigV4's.
   */
  token?: string;
  /** Retries of a 429, 502, 503 or 504, or a failed connection (default 4: after about 0.2, 0.4, 0.8, 1.6 s). */
  retries?: number;
  fetch?: typeof fetch;
}

export interface WaitOptions {
  /**
   * `'terminal'` (the default): SUCCEEDED, FAILED, CANCELLED or EXPIRED. A
   * state: that state or any later one of higher rank (waiting for RUNNING
   * returns a job found already SUCCEEDED); a terminal state other than the
   * one awaited rejects with code `unreachable`.
   */
  until?: 'terminal' | OperationState;
  /** Reject with code `timeout` after this long (default: wait as long as it takes). */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Called with each newly read version of the operation while waiting. */
  onChange?: (operation: OperationView) => void;
  /**
   * Wait on the server's per-operation long poll (`?afterVersion=&wait=`),
   * which answers the moment the job changes: the default against Ratchet on
   * one machine. Where the server does not offer it (a deployed stack), or
   * with `false`, the record is read again after 1 s, 2 s, 4 s… at most a
   * minute apart.
   */
  longPoll?: boolean;
}

/** What `watch` follows: one operation, a kind, a state (the state a change wrote), or everything. */
export interface WatchOptions {
  name?: string;
  kind?: OperationKind;
  state?: OperationState;
  /**
   * A cursor a change gave: go on after it. Without it `watch` first yields
   * the current record of every operation that matches (`snapshot: true`),
   * then each change from then on.
   */
  after?: string;
  signal?: AbortSignal;
}

/**
 * One item of `watch`: a change (`snapshot: false`), or an operation as it
 * stood when watching began or had to begin again (`snapshot: true`: the
 * change that made its current version; versions before it are not repeated).
 */
export type WatchedChange = OperationChange & { snapshot: boolean };

/** One page of the change feed (`GET /changes`). */
export interface ChangePage {
  changes: OperationChange[];
  /** Pass it back as `after`: past every change returned and everything scanned. */
  cursor: string;
}

/** A deployed API's own host name, `<id>.execute-api.<region>.amazonaws.com`; the region is its group. */
const EXECUTE_API_HOST = /\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$/;

/** Waits between reads in waitFor: 1 s, doubling to at most a minute. */
export const WAIT_FIRST_MS = 1_000;
export const WAIT_MAX_MS = 60_000;
/** How long one long poll waits on the server (below the 30 s many proxies allow a quiet response). */
export const LONG_POLL_SECONDS = 25;
/** `watch` reconnects after a failure with backoff up to this, for as long as it is not aborted. */
const RECONNECT_MAX_MS = 5_000;

export class RatchetClient {
  private readonly base: string;
  private readonly signer?: RequestSigner;
  private readonly token?: string;
  private readonly retries: number;
  private readonly fetch: typeof fetch;

  constructor(options: RatchetClientOptions) {
    const url = httpUrl(options?.url);
    this.base = url.href.replace(/\/+$/, '');
    this.retries = options.retries ?? 4;
    this.fetch = options.fetch ?? globalThis.fetch;
    if (options.signer === 'none') this.signer = undefined;
    else if (options.signer) this.signer = options.signer;
    else if (EXECUTE_API_HOST.test(url.hostname)) this.signer = sigV4Signer();
    const token = options.token ?? globalThis.process?.env?.RATCHET_API_TOKEN?.split(/[\s,]+/).find(Boolean);
    if (!this.signer && token) this.token = token;
  }

  /** Starts tracking a job (reconcile polls it before any webhook arrives). `created` is false when Ratchet already knew it. */
  async track(
    name: string,
    options: { metadata?: Record<string, unknown> } = {},
  ): Promise<{ operation: OperationRecord; created: boolean }> {
    const { status, body } = await this.request('POST', '/operations', { name, ...(options.metadata && { metadata: options.metadata }) });
    return { operation: body as OperationRecord, created: status === 201 };
  }

  /** The stored record with its polling status; undefined when Ratchet does not know the job. */
  async get(name: string, options: { signal?: AbortSignal } = {}): Promise<OperationView | undefined> {
    try {
      return (await this.request('GET', `/operations/${encodeName(name)}`, undefined, options.signal)).body as OperationView;
    } catch (error) {
      if (error instanceof RatchetError && error.code === 'not-found') return undefined;
      throw error;
    }
  }

  /** One page, most recently recorded first; pass `nextCursor` back for the next. */
  async list(
    filter: { state?: OperationState; kind?: OperationKind; limit?: number; cursor?: string } = {},
  ): Promise<{ operations: OperationView[]; nextCursor?: string }> {
    return (await this.request('GET', withQuery('/operations', filter))).body as { operations: OperationView[]; nextCursor?: string };
  }

  /** Every applied write of the job, in version order. */
  async history(name: string): Promise<HistoryEntry[]> {
    return ((await this.request('GET', `/operations/${encodeName(name)}/history`)).body as { history: HistoryEntry[] }).history;
  }

  /**
   * Resolves with the operation once it reaches `until`. The stored record is
   * read first, so a change that happened before the call is never missed.
   * Then, on Ratchet on one machine, the server holds each read until the job
   * changes (a long poll: resolved within milliseconds of the change); where
   * the server does not offer that, the record is read again after 1 s, 2 s,
   * 4 s… at most a minute apart. Rejects with `not-found` if Ratchet does not
   * know the job (track it first).
   */
  async waitFor(name: string, options: WaitOptions = {}): Promise<OperationView> {
    const { until = 'terminal', timeoutMs, signal, onChange } = options;
    checkWaitOptions(until, timeoutMs);
    const deadline = timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutMs;
    // A deployed stack (SigV4) has no long poll: no request is spent finding that out.
    let longPoll = (options.longPoll ?? true) && !this.signer;
    let delay = WAIT_FIRST_MS;
    let seen = 0;
    for (;;) {
      signal?.throwIfAborted();
      let operation: OperationView | undefined;
      if (longPoll) {
        const wait = Math.max(0, Math.min(LONG_POLL_SECONDS, (deadline - Date.now()) / 1000));
        const read = await this.getAfter(name, seen, wait, signal);
        operation = read.operation;
        // A server that ignored `wait` answered at once: poll it from now on.
        longPoll = read.waited;
      } else operation = await this.get(name, signal ? { signal } : {});
      if (!operation) throw new RatchetError('not-found', `Ratchet does not know ${name}: track it first`, 404);
      if (operation.version > seen) {
        seen = operation.version;
        onChange?.(operation);
      }
      if (reached(operation.state, until)) return operation;
      if (isTerminal(operation.state))
        throw new RatchetError('unreachable', `${name} ended ${operation.state}; it will never be ${until}`, undefined, operation);
      const stopped = pollingStopped(operation);
      if (stopped) throw stopped;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new RatchetError(
          'timeout',
          `${name} is still ${operation.state ?? 'unobserved'} after ${timeoutMs} ms`,
          undefined,
          operation,
        );
      if (longPoll) continue;
      await sleep(Math.min(delay, left), signal);
      delay = Math.min(delay * 2, WAIT_MAX_MS);
    }
  }

  /** The record once its version passes `afterVersion`, or after `waitSeconds` unchanged; `waited` false when the server ignored the wait. */
  private async getAfter(
    name: string,
    afterVersion: number,
    waitSeconds: number,
    signal?: AbortSignal,
  ): Promise<{ operation: OperationView | undefined; waited: boolean }> {
    const path = withQuery(`/operations/${encodeName(name)}`, { afterVersion, wait: waitSeconds.toFixed(3) });
    try {
      const { body, headers } = await this.request('GET', path, undefined, signal);
      return { operation: body as OperationView, waited: headers.has(LONG_POLL_HEADER) };
    } catch (error) {
      if (error instanceof RatchetError && error.code === 'not-found') return { operation: undefined, waited: true };
      throw error;
    }
  }

  /**
   * One page of the change feed (Ratchet on one machine): the changes after
   * `after` that match, in commit order, at once when there are some, else
   * after `wait` seconds (0 to 60) with none. Without `after`, the feed's
   * head: what changes from now on. A cursor the feed no longer keeps (a day)
   * rejects with code `cursor-expired`.
   */
  async changes(
    options: { after?: string; wait?: number; name?: string; kind?: OperationKind; state?: OperationState; limit?: number } = {},
    signal?: AbortSignal,
  ): Promise<ChangePage> {
    return (await this.request('GET', withQuery('/changes', options), undefined, signal)).body as ChangePage;
  }

  /**
   * Every change that matches, as it happens: an async iterator that never
   * ends on its own (break out of it, or abort `signal`). Without `after` it
   * first yields the operations as they stand (`snapshot: true`), all at one
   * cursor of the feed, then each change after it: one made while the
   * snapshot was read comes once, never twice, never missed. Keep the
   * `cursor` of what you handled (a snapshot's once you handled all of it) and
   * pass it back as `after` to go on exactly where you stopped: each change is
   * then seen once, in commit order (so in version order per operation).
   * Failed connections and server restarts are retried until `signal` aborts.
   * If the cursor is older than the feed keeps (a day), watching begins again
   * with a snapshot: nothing is skipped silently.
   */
  async *watch(options: WatchOptions = {}): AsyncGenerator<WatchedChange, void, undefined> {
    const { signal } = options;
    const filter = {
      ...(options.name !== undefined && { name: options.name }),
      ...(options.kind && { kind: options.kind }),
      ...(options.state && { state: options.state }),
    };
    let cursor = options.after;
    let failures = 0;
    // Aborting the signal ends the iteration, quietly: it is how a watcher is told to stop.
    while (!signal?.aborted) {
      try {
        if (cursor === undefined) {
          const snapshot = await this.snapshot(filter, signal);
          for (const change of snapshot.changes) yield { ...change, snapshot: true };
          cursor = snapshot.cursor;
        }
        const page = await this.changes({ ...filter, after: cursor, wait: LONG_POLL_SECONDS }, signal);
        failures = 0;
        for (const change of page.changes) {
          yield { ...change, snapshot: false };
          cursor = change.cursor;
        }
        cursor = page.cursor;
      } catch (error) {
        if (signal?.aborted) return;
        if (!(error instanceof RatchetError)) throw error;
        if (error.code === 'cursor-expired') {
          cursor = undefined;
          continue;
        }
        // A restart, a dropped connection, a busy server: go on from the cursor once it answers again.
        if (error.code !== 'network' && error.status !== 503 && error.status !== 502 && error.status !== 504) throw error;
        await sleep(Math.min(RECONNECT_MAX_MS, backoff(failures++)), signal).catch(() => undefined);
      }
    }
  }

  /**
   * The matching operations as they stand at one cursor of the feed, which
   * every item carries. The records are read after a first cursor, then the
   * feed's changes since are read up to a second, and each operation is
   * given at its latest version: the state at that second cursor exactly, so
   * going on after it neither repeats nor misses a change.
   */
  private async snapshot(
    filter: { name?: string; kind?: OperationKind; state?: OperationState },
    signal?: AbortSignal,
  ): Promise<{ changes: OperationChange[]; cursor: string }> {
    let cursor = (await this.changes({}, signal)).cursor;
    const latest = new Map<string, OperationChange>();
    const keep = (change: OperationChange) => {
      if ((latest.get(change.name)?.version ?? 0) < change.version) latest.set(change.name, change);
    };
    if (filter.name !== undefined) {
      const operation = await this.get(filter.name, signal ? { signal } : {});
      if (operation) keep(changeOf(operation, cursor, operation.recordedAt));
    } else {
      let page: string | undefined;
      do {
        const listed = await this.list({ ...filter, limit: 100, ...(page && { cursor: page }) });
        for (const operation of listed.operations) keep(changeOf(operation, cursor, operation.recordedAt));
        page = listed.nextCursor;
      } while (page);
    }
    // Whatever changed while the records were read (in any state: one may have left the state asked for).
    const { state, ...scope } = filter;
    for (;;) {
      const page = await this.changes({ ...scope, after: cursor, limit: 1000 }, signal);
      for (const change of page.changes) keep(change);
      if (page.cursor === cursor) break;
      cursor = page.cursor;
    }
    const changes = [...latest.values()]
      .filter((change) => (!filter.kind || change.kind === filter.kind) && (!state || change.state === state))
      .map((change) => ({ ...change, cursor }));
    return { changes, cursor };
  }

  private async request(
    method: 'GET' | 'POST',
    path: string,
    json?: unknown,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: unknown; headers: Headers }> {
    const url = new URL(`${this.base}${path}`);
    const body = json === undefined ? undefined : JSON.stringify(json);
    for (let attempt = 0; ; attempt++) {
      let headers: Record<string, string> = {
        accept: 'application/json',
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...(this.token && { authorization: `Bearer ${this.token}` }),
      };
      if (this.signer) headers = { ...headers, ...(await this.signer({ method, url, headers, ...(body !== undefined && { body }) })) };
      let response: Response;
      try {
        response = await this.fetch(url, { method, headers, ...(body !== undefined && { body }), ...(signal && { signal }) });
      } catch (error) {
        signal?.throwIfAborted();
        if (attempt < this.retries) {
          await sleep(backoff(attempt), signal);
          continue;
        }
        throw new RatchetError(
          'network',
          `${method} ${url.origin}${url.pathname}: ${networkFailureInWords(error)}, after ${attempt + 1} attempts`,
          undefined,
          undefined,
          { cause: error },
        );
      }
      if (RETRIED.has(response.status) && attempt < this.retries) {
        await response.body?.cancel();
        await sleep(backoff(attempt), signal);
        continue;
      }
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new RatchetError(
          'unexpected-response',
          `${method} ${url.pathname}: HTTP ${response.status}, not JSON: ${text.slice(0, 200)}`,
          response.status,
        );
      }
      if (response.ok) return { status: response.status, body: parsed, headers: response.headers };
      const { error, message } = (parsed ?? {}) as { error?: string; message?: string };
      // API Gateway's own refusals (a missing or bad signature: 403 {"message": …}) carry no code of ours.
      const code = (error ?? (response.status === 403 ? 'invalid-signature' : 'unexpected-response')) as RatchetErrorCode;
      throw new RatchetError(code, `${method} ${url.pathname}: HTTP ${response.status}: ${message ?? text.slice(0, 200)}`, response.status);
    }
  }
}

/**
 * Answers that pass: 503 (Ratchet's store briefly unavailable), and API
 * Gateway's 429 (its throttle), 502 and 504 (the function failed or timed
 * out). Every call is safe to repeat: reads, and tracking (a known job is 200).
 */
const RETRIED = new Set([429, 502, 503, 504]);

/** The API's base URL, or a RatchetError naming what was given instead. */
function httpUrl(given: unknown): URL {
  let url: URL | undefined;
  try {
    url = new URL(String(given));
  } catch {
    // not a URL at all: said below
  }
  if (typeof given !== 'string' || !url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new RatchetError(
      'invalid-url',
      `RatchetClient: url must be an http:// or https:// URL, got ${JSON.stringify(given) ?? String(given)}`,
    );
  return url;
}

/** `path`, with the parameters that are set as its query. */
function withQuery(path: string, parameters: Record<string, string | number | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(parameters)) if (value !== undefined) query.set(key, String(value));
  return query.size > 0 ? `${path}?${query}` : path;
}

/** Names keep their slashes (`batches/123`); each segment is escaped. */
function encodeName(name: string): string {
  return name.split('/').map(encodeURIComponent).join('/');
}

/**
 * Reconcile stopped polling an open operation for good: Gemini no longer knows
 * it (`not-found`: a 404 never becomes a terminal state), or the name can never
 * be polled here (`polling-stopped`). Only a webhook could still move it, so a
 * wait for it ends at once.
 */
function pollingStopped(operation: OperationView): RatchetError | undefined {
  const polling = operation.polling;
  if (!polling || polling.nextPollAt !== null || !polling.note || isTerminal(operation.state)) return undefined;
  const state = operation.state ?? 'unobserved';
  if (polling.note === 'not-found') {
    return new RatchetError(
      'not-found',
      `${operation.name}: Gemini no longer knows it (404 ${polling.notFoundPolls} times in a row); polling stopped with it ${state}`,
      404,
      operation,
    );
  }
  if (!STOPPED_NOTES.has(polling.note)) return undefined;
  return new RatchetError('polling-stopped', `${operation.name}: polling stopped (${polling.note}) with it ${state}`, undefined, operation);
}

/** Why reconcile stops polling an open operation for good (besides not-found). */
const STOPPED_NOTES = new Set(['invalid-name', 'other-project', 'expired-unseen']);

/** `until` and `timeoutMs` as waitFor takes them, or a RatchetError at once: a wait for a state that cannot come never ends. */
function checkWaitOptions(until: unknown, timeoutMs: unknown): void {
  if (until !== 'terminal' && !(OPERATION_STATES as readonly unknown[]).includes(until)) {
    const upper = typeof until === 'string' ? until.toUpperCase() : '';
    const hint =
      (OPERATION_STATES as readonly string[]).includes(upper) || upper === 'TERMINAL'
        ? ` (did you mean '${upper === 'TERMINAL' ? 'terminal' : upper}'?)`
        : '';
    throw new RatchetError(
      'invalid-argument',
      `waitFor: until must be 'terminal' or one of ${OPERATION_STATES.join(', ')}, not ${JSON.stringify(until)}${hint}`,
    );
  }
  if (timeoutMs !== undefined && !(typeof timeoutMs === 'number' && timeoutMs >= 0))
    throw new RatchetError(
      'invalid-argument',
      `waitFor: timeoutMs must be a number of milliseconds, 0 or more, not ${JSON.stringify(timeoutMs)}`,
    );
}

function reached(state: OperationState | null, until: 'terminal' | OperationState): boolean {
  if (until === 'terminal') return isTerminal(state);
  if (state === until) return true;
  return !isTerminal(until) && rankOf(state) > rankOf(until);
}

function backoff(attempt: number): number {
  return 200 * 2 ** attempt * (0.75 + Math.random() / 2);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', abort, { once: true });
  });
}

/**
 * SigV4 for API Gateway (`execute-api`) with the SDK's own signer and, unless
 * given, the default credential chain (environment, SSO, profiles, the
 * Lambda or container role…). The region is read from the API's host name
 * unless given (a custom domain needs it). Loaded on first use only, from
 * the client's optional peer dependencies (SIGV4_PACKAGES): an app that never
 * talks to a deployed stack installs none of the AWS SDK.
 */
export function sigV4Signer(
  options: { region?: string; credentials?: AwsCredentials | (() => Promise<AwsCredentials>) } = {},
): RequestSigner {
  let signer: Promise<Signer> | undefined;
  return async ({ method, url, headers, body }) => {
    const region = options.region ?? url.hostname.match(EXECUTE_API_HOST)?.[1] ?? process.env.AWS_REGION;
    if (!region) throw new RatchetError('invalid-signature', `cannot tell the region of ${url.host}: pass sigV4Signer({ region })`);
    signer ??= (async () => {
      const [{ SignatureV4 }, { Sha256 }, credentials] = await Promise.all([
        optionalPeer(() => import('@smithy/signature-v4'), '@smithy/signature-v4'),
        optionalPeer(() => import('@smithy/core/checksum'), '@smithy/core'),
        options.credentials ??
          optionalPeer(() => import('@aws-sdk/credential-provider-node'), '@aws-sdk/credential-provider-node').then((m) =>
            m.defaultProvider(),
          ),
      ]);
      return new SignatureV4({ service: 'execute-api', region, sha256: Sha256, credentials });
    })().catch((error) => {
      signer = undefined; // a package installed meanwhile is found on the next request
      throw error;
    });
    const signed = await (await signer).sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port && { port: Number(url.port) }),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: { ...headers, host: url.host },
      ...(body !== undefined && { body }),
    });
    const { host: _host, ...rest } = signed.headers;
    return rest;
  };
}

/** AWS credentials, as the SDK's providers give them. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** What the client needs of the SDK's SignatureV4. */
interface Signer {
  sign(request: {
    method: string;
    protocol: string;
    hostname: string;
    port?: number;
    path: string;
    query: Record<string, string>;
    headers: Record<string, string>;
    body?: string;
  }): Promise<{ headers: Record<string, string> }>;
}

/**
 * The SigV4 packages are optional peer dependencies: only an app that talks
 * to a deployed stack installs them. Missing, they make one clear error.
 */
async function optionalPeer<T>(load: () => Promise<T>, name: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw error;
    throw new RatchetError(
      'missing-dependency',
      `signing requests to a deployed Ratchet (SigV4) needs ${name}: npm install ${SIGV4_PACKAGES.join(' ')}`,
    );
  }
}

/** What an app installs beside the client to sign with SigV4 (the client's optional peer dependencies). */
export const SIGV4_PACKAGES = ['@smithy/signature-v4', '@smithy/core', '@aws-sdk/credential-provider-node'];
