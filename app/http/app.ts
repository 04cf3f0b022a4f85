/**
 * The HTTP API, one Hono app for API Gateway (via hono/aws-lambda) and for the
 * local runtime (via @hono/node-server). Handlers are thin: parse, call one
 * use case (the webhook's is app/http/webhook.ts), shape the response.
 */
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { LONG_POLL_HEADER } from '../../core/change.ts';
import { type Failure, failureBody, failureResponse, RETRY_AFTER_SECONDS } from '../../core/failures.ts';
import { OPERATION_KINDS, OPERATION_STATES } from '../../core/lifecycle.ts';
import { kindOfName, normalizeOperationName } from '../../core/names.ts';
import { storeAway } from '../../core/network.ts';
import { type OperationRecord, trackedRecord } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import type { HistoryLog } from '../history.ts';
import {
  EFFECTS_FILTERS,
  InvalidCursorError,
  type OperationQueries,
  type StoreHealth,
  StoreRejectedError,
  UnsupportedFilterError,
} from '../ports.ts';
import type { CredentialStatus } from '../reconcile/credentials.ts';
import { DecisionsQuery, ListQuery, LongPollQuery, MAX_WAIT_SECONDS, TrackRequest } from './api-schemas.ts';
import { openApiText } from './openapi.ts';
import { MAX_WEBHOOK_BODY_BYTES, receiveWebhook, type WebhookDeps } from './webhook.ts';

/** `{"name": …}` with a name of at most 512 bytes fits many times over. */
export const MAX_TRACK_BODY_BYTES = 4 * 1024;

export interface AppDeps extends WebhookDeps {
  /** The list and the polling status (`GET /operations`); without it `GET /operations/{name}` answers the bare record and the list is 404. */
  queries?: OperationQueries;
  /** `GET /operations/{name}/history` (written from the stream, see lambda/history); without it the route is 400. */
  history?: Pick<HistoryLog, 'list'>;
  /** Whether the store answers (the local runtime); without it `/healthz` reports the process only. */
  health?: () => Promise<StoreHealth>;
  /** Whether Gemini takes each labelled API key (GEMINI_API_KEYS): `/healthz` names a refused one, by label. */
  geminiKeys?: () => CredentialStatus[];
  /**
   * Whether a browser's Origin may send a state-changing request. Default: the
   * request's own origin (API Gateway, where the routes need SigV4 anyway);
   * the local runtime passes its allow-list (local/access/guard.ts).
   */
  originAllowed?: (origin: string, requestUrl: string) => boolean;
  /** Middleware in front of every route, put on the app first (the local runtime's access guard). */
  guard?: (app: Hono) => void;
  /** The webhook's receiver, when the runtime also calls it outside the app (local/http-server.ts): one instance for both. */
  receive?: ReturnType<typeof receiveWebhook>;
  /**
   * The per-operation long poll (`GET /operations/{name}?afterVersion=N&wait=S`; the local runtime's change feed):
   * resolves true once `name` has a version past `afterVersion` (default: the version it has when called), false
   * after `waitMs` or on `signal`. It must start listening synchronously, when called: the record is read after,
   * so no change falls between. Without
   * it (API Gateway) the two parameters are ignored and the record is answered at once.
   */
  waitForVersion?: (name: string, afterVersion: number | undefined, waitMs: number, signal: AbortSignal) => Promise<boolean>;
  /**
   * The labels of the Gemini API keys reconcile polls with (GEMINI_API_KEYS): a track naming another is refused.
   * Undefined where this process does not know them (API Gateway: the keys are the reconcile function's).
   */
  credentials?: string[];
  /** Where the app is mounted (inside an app): the server `GET /openapi.json` names. */
  basePath?: string;
  /** Routes only one runtime has (the local runtime's effects admin), with the app's helpers. */
  extraRoutes?: (app: Hono, helpers: { sameOriginJson: MiddlewareHandler; fail: (failure: Failure, message: string) => Response }) => void;
}

/** What a `wait` out of range is told (the per-operation long poll here, the change feed's routes in local/feed). */
export const WAIT_RANGE = `wait must be a number of seconds from 0 to ${MAX_WAIT_SECONDS}`;

/** A long poll's `wait`, in seconds (0–60, fractions allowed; absent: 0), as milliseconds; undefined when it is not one. */
export function waitMsOf(wait: string | undefined): number | undefined {
  if (wait === undefined) return 0;
  // The schema the description gives it; an empty value (which a number coerces to 0) is no number of seconds.
  const seconds = LongPollQuery.shape.wait.safeParse(wait);
  if (wait.trim() === '' || !seconds.success || seconds.data === undefined) return undefined;
  return Math.round(seconds.data * 1000);
}

/** A 400 naming the parameter it refuses (`field`), as every route with parameters answers one. */
function refuse(c: Context, field: string, message: string): Response {
  return c.json({ ...failureBody('malformed-request', message), field }, 400);
}

const LIMIT = 'limit must be a whole number from 1 to 100';
const CURSOR = "cursor must be a page's nextCursor, as this API handed it out";

/** What each parameter of `GET /operations` must be, said when it is the one refused. */
const LIST_PARAMETERS: Record<keyof typeof ListQuery.shape, string> = {
  state: `state must be one of ${OPERATION_STATES.join(', ')}`,
  kind: `kind must be one of ${OPERATION_KINDS.join(', ')}`,
  effects: `effects must be one of ${EFFECTS_FILTERS.join(', ')}`,
  overdue: 'overdue must be true or false',
  limit: LIMIT,
  cursor: CURSOR,
};

/** The same for `GET /decisions`. */
const DECISIONS_PARAMETERS: Record<keyof typeof DecisionsQuery.shape, string> = {
  outcome: "outcome must be unprocessable (one operation's decisions: GET /operations/{name}/decisions)",
  limit: LIMIT,
  cursor: CURSOR,
};

/** The first parameter a query's schema refused, named, with what it must be. */
function refuseParameter(c: Context, error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey> }> }, said: Record<string, string>) {
  const field = String(error.issues[0]?.path[0] ?? '');
  return refuse(c, field, said[field] ?? `${field} is not a value this list takes`);
}

function longPollOf(
  afterVersion: string | undefined,
  wait: string | undefined,
): { field: string; message: string } | { afterVersion?: number; waitMs: number } {
  const waitMs = waitMsOf(wait);
  if (waitMs === undefined) return { field: 'wait', message: WAIT_RANGE };
  if (afterVersion === undefined) return { waitMs };
  const version = LongPollQuery.shape.afterVersion.safeParse(afterVersion);
  if (afterVersion.trim() === '' || !version.success || version.data === undefined)
    return { field: 'afterVersion', message: 'afterVersion must be a whole number, 0 or more' };
  return { afterVersion: version.data, waitMs };
}

function tryName(value: string): string | undefined {
  try {
    return normalizeOperationName(value);
  } catch {
    return undefined;
  }
}

/** The Origin header names the scheme, host and port the request itself was sent to. */
function sameOrigin(origin: string, requestUrl: string): boolean {
  try {
    return new URL(origin).origin === new URL(requestUrl).origin;
  } catch {
    return false; // "null" (sandboxed frames, files) and anything unparseable
  }
}

export function createApp(deps: AppDeps): Hono {
  const { store, logger } = deps;
  const originAllowed = deps.originAllowed ?? sameOrigin;
  const clock = deps.clock ?? (() => new Date());
  const app = new Hono();
  deps.guard?.(app);
  const fail = failureResponse;

  app.get('/healthz', async (c) => {
    const health = await deps.health?.();
    if (health !== undefined && health !== 'ok') {
      c.header('retry-after', String(RETRY_AFTER_SECONDS));
      return c.json({ status: 'degraded', store: 'unavailable', reason: health.unavailable }, 503);
    }
    // A key Gemini refuses stops only its own jobs' polls: said here (by label, never the key), the instance still serves.
    const refused = (deps.geminiKeys?.() ?? []).filter((key) => key.state === 'refused');
    if (refused.length === 0) return c.json({ status: 'ok' });
    // A single GEMINI_API_KEY has no label: its refusal is said without one.
    return c.json({
      status: 'ok',
      geminiKeys: { refused: refused.map(({ label, status, at }) => ({ ...(label && { label }), status, at })) },
    });
  });

  const limit = (maxSize: number) =>
    bodyLimit({
      maxSize,
      onError: () => {
        const response = fail('payload-too-large', `body exceeds ${maxSize} bytes`);
        // The rest of the body is never read: a client must not reuse this connection.
        response.headers.set('connection', 'close');
        return response;
      },
    });

  const receive = deps.receive ?? receiveWebhook(deps);
  app.post('/webhooks/gemini', limit(MAX_WEBHOOK_BODY_BYTES), async (c) => {
    let raw: string;
    try {
      raw = await c.req.text();
    } catch (error) {
      // Inside an app: a body parser in front of the mount (express.json()) read the stream first.
      if (!(error instanceof TypeError)) throw error;
      logger.error('webhook body unreadable: read before Ratchet got it', { detail: error.message });
      return fail(
        'internal',
        'the request body was read before Ratchet got it: something in front of Ratchet (a body parser such as express.json()) took it; mount Ratchet before any body parser',
      );
    }
    const answer = await receive(raw, c.req.raw.headers);
    if (answer.retryAfterSeconds !== undefined) c.header('retry-after', String(answer.retryAfterSeconds));
    return c.json(answer.body, answer.status as ContentfulStatusCode);
  });

  // Not a "simple" request a page could send cross-site: JSON only, from no browser or from this origin.
  const sameOriginJson: MiddlewareHandler = async (c, next) => {
    const origin = c.req.header('origin');
    if (origin !== undefined && !originAllowed(origin, c.req.url)) {
      logger.warn('request from a foreign origin refused', { origin: origin.slice(0, 200), path: c.req.path });
      return fail('foreign-origin', 'requests from another origin are refused');
    }
    if (!/^application\/json\s*(;|$)/i.test(c.req.header('content-type') ?? '')) {
      return fail('unsupported-media-type', 'content-type must be application/json');
    }
    await next();
  };

  app.post('/operations', sameOriginJson, limit(MAX_TRACK_BODY_BYTES), async (c) => {
    let name: string;
    let metadata: Record<string, unknown> | undefined;
    let credential: string | undefined;
    try {
      const request = TrackRequest.safeParse(await c.req.json());
      if (!request.success)
        return fail(
          'malformed-request',
          'body must be {"name": "<operation name>", "metadata"?: {…}, "credential"?: "<label of a GEMINI_API_KEYS key>"}',
        );
      name = normalizeOperationName(request.data.name);
      metadata = request.data.metadata;
      credential = request.data.credential;
    } catch (error) {
      return fail('malformed-request', (error as Error).message);
    }
    const known = deps.credentials;
    if (credential !== undefined && known && !known.includes(credential)) {
      return fail(
        'malformed-request',
        known.length === 0
          ? `credential ${JSON.stringify(credential)} names no key: this Ratchet polls with one key (GEMINI_API_KEYS is not set)`
          : `credential ${JSON.stringify(credential)} names no key: GEMINI_API_KEYS has ${known.map((l) => JSON.stringify(l)).join(', ')}`,
      );
    }
    try {
      // A job tracked with no label is polled with the first key: its record says so.
      const record = trackedRecord(name, kindOfName(name), timeFromDate(clock()), metadata, credential ?? known?.[0]);
      const written = await store.write(record, undefined);
      if (written.ok) {
        logger.info('operation tracked', { operation: name });
        return c.json(record, 201);
      }
      return c.json(written.current, 200);
    } catch (error) {
      logger.error('track failed', { operation: name, error });
      if (error instanceof StoreRejectedError) return fail('unstorable', error.message);
      return fail('not-recorded', 'store unavailable; retry later');
    }
  });

  const queries = deps.queries;
  if (queries) {
    app.get('/operations', async (c) => {
      const query = ListQuery.safeParse(c.req.query());
      if (!query.success) return refuseParameter(c, query.error, LIST_PARAMETERS);
      const { state, kind, effects, overdue, limit, cursor } = query.data;
      try {
        return c.json(
          await queries.list({ state, kind, effects, ...(overdue === 'true' && { overdue: true }), limit: limit ?? 50, cursor }),
        );
      } catch (error) {
        if (error instanceof InvalidCursorError) return refuse(c, 'cursor', error.message);
        if (error instanceof UnsupportedFilterError) return fail('malformed-request', error.message);
        logger.error('list failed', { error });
        return fail('not-recorded', 'store unavailable; retry later');
      }
    });
  }

  // Authentic deliveries that could never be used (answered 200 all the same), newest first.
  const unprocessable = deps.unprocessable;
  if (unprocessable) {
    app.get('/decisions', async (c) => {
      const query = DecisionsQuery.safeParse(c.req.query());
      if (!query.success) return refuseParameter(c, query.error, DECISIONS_PARAMETERS);
      try {
        return c.json(await unprocessable.listUnprocessable({ limit: query.data.limit ?? 50, cursor: query.data.cursor }));
      } catch (error) {
        if (error instanceof InvalidCursorError) return refuse(c, 'cursor', error.message);
        logger.error('decisions list failed', { error });
        return fail('not-recorded', 'store unavailable; retry later');
      }
    });
  }

  // `{name}`, `{name}/history`, `{name}/decisions`: a path that is a whole name is the record (`batches/history`
  // is a batch), else a name followed by `/history` or `/decisions` is that operation's history or decisions.
  app.get('/operations/:path{.+}', async (c) => {
    const path = c.req.param('path');
    let name: string;
    let view: 'record' | 'history' | 'decisions' = 'record';
    try {
      name = normalizeOperationName(path);
    } catch (error) {
      const suffix = (['history', 'decisions'] as const).find(
        (s) => path.endsWith(`/${s}`) && (s === 'history' ? deps.history : deps.decisions),
      );
      const named = suffix && tryName(path.slice(0, -suffix.length - 1));
      if (!suffix || !named) return fail('malformed-request', (error as Error).message);
      name = named;
      view = suffix;
    }
    const named = name;
    const read = () => (queries ? queries.describe(named) : store.get(named));
    if (view === 'record' && deps.waitForVersion && (c.req.query('wait') !== undefined || c.req.query('afterVersion') !== undefined)) {
      const wait = longPollOf(c.req.query('afterVersion'), c.req.query('wait'));
      if ('field' in wait) return refuse(c, wait.field, wait.message);
      return longPoll(c, named, wait, read, deps.waitForVersion);
    }
    try {
      const record = await read();
      if (!record) return fail('not-found', `no operation named ${JSON.stringify(name)}`);
      if (view === 'history' && deps.history) return c.json({ name, history: await deps.history.list(name) });
      if (view === 'decisions' && deps.decisions) return c.json({ name, decisions: await deps.decisions.decisions(name) });
      return c.json(record);
    } catch (error) {
      logger.error('read failed', { operation: name, error });
      return fail('not-recorded', 'store unavailable; retry later');
    }
  });

  /** Answers once the version passes `afterVersion` (default: the version read now), or after `waitMs` with the record unchanged. */
  async function longPoll(
    c: Context,
    name: string,
    wait: { afterVersion?: number; waitMs: number },
    read: () => Promise<OperationRecord | undefined>,
    waitForVersion: NonNullable<AppDeps['waitForVersion']>,
  ): Promise<Response> {
    const stop = new AbortController();
    const abort = () => stop.abort();
    c.req.raw.signal.addEventListener('abort', abort, { once: true });
    try {
      // Listening first, then reading: a change after the read is caught, one before it is in the record.
      const listening = waitForVersion(name, wait.afterVersion, wait.waitMs, stop.signal);
      let record = await read();
      if (!record) return fail('not-found', `no operation named ${JSON.stringify(name)}`);
      if ((wait.afterVersion === undefined || record.version <= wait.afterVersion) && (await listening)) record = (await read()) ?? record;
      c.header(LONG_POLL_HEADER, String(wait.waitMs / 1000));
      return c.json(record);
    } catch (error) {
      logger.error('read failed', { operation: name, error });
      return fail('not-recorded', 'store unavailable; retry later');
    } finally {
      stop.abort();
      c.req.raw.signal.removeEventListener('abort', abort);
    }
  }

  // Behind the credential like every route but the webhook and /healthz (the local runtime's guard).
  app.get('/openapi.json', (c) => c.body(openApiText(deps.basePath), 200, { 'content-type': 'application/json' }));

  deps.extraRoutes?.(app, { sameOriginJson, fail });
  app.notFound(() => fail('not-found', 'no such route'));
  app.onError((error) => {
    // A middleware's own answer (the local runtime's bearer check, a 401 with its WWW-Authenticate).
    if (error instanceof HTTPException) return error.getResponse();
    // The database restarting, failing over or out of connections, under a route with no answer of its own for it.
    if (storeAway(error)) {
      logger.warn('store away: answered 503', { detail: (error as Error).message });
      return fail('not-recorded', 'the store is away for now; retry shortly');
    }
    logger.error('unhandled error', { error });
    return fail('internal', 'internal error');
  });
  return app;
}
