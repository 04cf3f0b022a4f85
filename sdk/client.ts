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
 *
 * This file is the API (track, get, list, history, waitFor, changes, watch);
 * client/transport.ts the requests and their retries, client/sigv4.ts the
 * signing, client/errors.ts the errors, client/waiting.ts what waitFor decides.
 */
import { changeOf, LONG_POLL_HEADER, type OperationChange } from '../core/change.ts';
import { isTerminal, type OperationKind, type OperationState, type ProviderName, providerOf } from '../core/lifecycle.ts';
import type { OperationRecord, OperationResult } from '../core/reducer.ts';
import type { HistoryEntry, OperationView } from '../core/views.ts';
import { RatchetError } from './client/errors.ts';
import type { RequestSigner } from './client/sigv4.ts';
import { backoff, encodeName, sleep, Transport, withQuery } from './client/transport.ts';
import { checkWaitOptions, pollingStopped, reached } from './client/waiting.ts';

export { RatchetError, type RatchetErrorCode } from './client/errors.ts';
export { type AwsCredentials, type RequestSigner, SIGV4_PACKAGES, sigV4Signer } from './client/sigv4.ts';
export type { HistoryEntry, OperationChange, OperationKind, OperationRecord, OperationResult, OperationState, OperationView, ProviderName };

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

/** What `watch` follows: one operation, a kind, a provider's jobs, a state (the state a change wrote), or everything. */
export interface WatchOptions {
  name?: string;
  kind?: OperationKind;
  /** Only this provider's jobs. */
  provider?: ProviderName;
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

/** Waits between reads in waitFor: 1 s, doubling to at most a minute. */
export const WAIT_FIRST_MS = 1_000;
export const WAIT_MAX_MS = 60_000;
/** How long one long poll waits on the server (below the 30 s many proxies allow a quiet response). */
export const LONG_POLL_SECONDS = 25;
/** `watch` reconnects after a failure with backoff up to this, for as long as it is not aborted. */
const RECONNECT_MAX_MS = 5_000;

export class RatchetClient {
  private readonly transport: Transport;

  constructor(options: RatchetClientOptions) {
    this.transport = new Transport({ ...options, url: options?.url });
  }

  private request(method: 'GET' | 'POST', path: string, json?: unknown, signal?: AbortSignal) {
    return this.transport.request(method, path, json, signal);
  }

  /**
   * Starts tracking a job (reconcile polls it before any webhook arrives). `created` is false when Ratchet already
   * knew it. `credential`: the label of the Gemini API key that created the job (the server's GEMINI_API_KEYS),
   * which polls it; a batch is visible only to its own key.
   */
  async track(
    name: string,
    options: { metadata?: Record<string, unknown>; credential?: string } = {},
  ): Promise<{ operation: OperationRecord; created: boolean }> {
    const { status, body } = await this.request('POST', '/operations', {
      name,
      ...(options.metadata && { metadata: options.metadata }),
      ...(options.credential && { credential: options.credential }),
    });
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

  /** One page, most recently recorded first; pass `nextCursor` back for the next. `overdue`: only open jobs past their kind's limit. */
  async list(
    filter: {
      state?: OperationState;
      kind?: OperationKind;
      provider?: ProviderName;
      overdue?: boolean;
      limit?: number;
      cursor?: string;
    } = {},
  ): Promise<{ operations: OperationView[]; nextCursor?: string }> {
    return (await this.request('GET', withQuery('/operations', filter))).body as { operations: OperationView[]; nextCursor?: string };
  }

  /** Every applied write of the job, in version order. */
  async history(name: string): Promise<HistoryEntry[]> {
    return ((await this.request('GET', `/operations/${encodeName(name)}/history`)).body as { history: HistoryEntry[] }).history;
  }

  /**
   * Resolves with the operation once it reaches `until` (and, once ended, has
   * its outcome: a job a bare webhook ended is waited for until the poll that
   * brings its `result`, while it is polled for it). The stored record is
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
    let longPoll = (options.longPoll ?? true) && !this.transport.signer;
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
      // Ended, its outcome still to come (a bare webhook): waited for too, while the job is polled for it.
      const awaitingOutcome = operation.resultPending === true && operation.polling?.nextPollAt !== null;
      const arrived = reached(operation.state, until);
      if (arrived && !awaitingOutcome) return operation;
      if (isTerminal(operation.state) && !arrived)
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
    options: {
      after?: string;
      wait?: number;
      name?: string;
      kind?: OperationKind;
      provider?: ProviderName;
      state?: OperationState;
      limit?: number;
    } = {},
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
      ...(options.provider && { provider: options.provider }),
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
    filter: { name?: string; kind?: OperationKind; provider?: ProviderName; state?: OperationState },
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
      .filter(
        (change) =>
          (!filter.kind || change.kind === filter.kind) &&
          (!filter.provider || providerOf(change.kind) === filter.provider) &&
          (!state || change.state === state),
      )
      .map((change) => ({ ...change, cursor }));
    return { changes, cursor };
  }
}
