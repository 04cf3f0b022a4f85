/**
 * What every route group (app/http/routes/*.ts) shares: a route declared once
 * as data (served from it here, described from it in app/http/openapi.ts),
 * the refusals every group answers the same way, and the one table that turns
 * a thrown error into an answer (the app's onError).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Context, ErrorHandler, Hono, MiddlewareHandler, NotFoundHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { HTTPException } from 'hono/http-exception';
import { failureBody, failureResponse } from '../../../core/failures.ts';
import { storeAway } from '../../../core/network.ts';
import { InvalidCursorError, StoreRejectedError, UnsupportedFilterError } from '../../ports.ts';
import { LongPollQuery, MAX_WAIT_SECONDS } from '../api-schemas.ts';

export type Json = Record<string, unknown>;

/** One route: served by `serve`, described by app/http/openapi.ts, both from this. */
export interface Route {
  method: 'get' | 'post';
  /** Where it is served, as the description writes it: `{name}` is an operation's name, which holds `/`. */
  path: string;
  /** What the description says of it, an OpenAPI operation object: made when the description is (its first `GET /openapi.json`), not at every cold start. */
  doc: () => Json;
}

/** Hono's path for a described one: a `{name}` takes the rest of the path (`batches/123` holds a `/`). */
export const honoPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1{.+}');

/** `route` on `app`: its middleware, then its handler. */
export function serve(app: Hono, route: Route, ...handlers: MiddlewareHandler[]): void {
  app.on(route.method.toUpperCase(), honoPath(route.path), ...(handlers as [MiddlewareHandler]));
}

export const fail = failureResponse;

/** A 400 naming the parameter it refuses (`field`), as every route with parameters answers one. */
export function refuse(c: Context, field: string, message: string): Response {
  return c.json({ ...failureBody('malformed-request', message), field }, 400);
}

/** What a list's `limit` and `cursor` must be, said when refused. */
export const LIMIT_SAID = 'limit must be a whole number from 1 to 100';
export const CURSOR_SAID = "cursor must be a page's nextCursor, as this API handed it out";

/** The first parameter a query's schema refused, named, with what it must be (`said`, by parameter). */
export function refuseParameter(
  c: Context,
  error: { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey> }> },
  said: Record<string, string>,
): Response {
  const field = String(error.issues[0]?.path[0] ?? '');
  return refuse(c, field, said[field] ?? `${field} is not a value this list takes`);
}

/** A body of at most `maxSize` bytes, else 413. */
export const limit = (maxSize: number) =>
  bodyLimit({
    maxSize,
    onError: () => {
      const response = fail('payload-too-large', `body exceeds ${maxSize} bytes`);
      // The rest of the body is never read: a client must not reuse this connection.
      response.headers.set('connection', 'close');
      return response;
    },
  });

/** Whether a browser's Origin may send a state-changing request. */
export type OriginAllowed = (origin: string, requestUrl: string) => boolean;

/** The Origin header names the scheme, host and port the request itself was sent to. */
function sameOrigin(origin: string, requestUrl: string): boolean {
  try {
    return new URL(origin).origin === new URL(requestUrl).origin;
  } catch {
    return false; // "null" (sandboxed frames, files) and anything unparseable
  }
}

/** Not a "simple" request a page could send cross-site: JSON only, from no browser or from an allowed origin (default: its own). */
export function sameOriginJson(logger: Logger, originAllowed: OriginAllowed = sameOrigin): MiddlewareHandler {
  return async function sameOriginJson(c, next) {
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
}

/** What a `wait` out of range is told (the per-operation long poll and the change feed). */
export const WAIT_RANGE = `wait must be a number of seconds from 0 to ${MAX_WAIT_SECONDS}`;

/** A long poll's `wait`, in seconds (0–60, fractions allowed; absent: 0), as milliseconds; undefined when it is not one. */
export function waitMsOf(wait: string | undefined): number | undefined {
  if (wait === undefined) return 0;
  // The schema the description gives it; an empty value (which a number coerces to 0) is no number of seconds.
  const seconds = LongPollQuery.shape.wait.safeParse(wait);
  if (wait.trim() === '' || !seconds.success || seconds.data === undefined) return undefined;
  return Math.round(seconds.data * 1000);
}

/** The requests under a route whose whole work is the store's (`storeBound`): whatever they throw is the store unavailable. */
const storeBoundRequests = new WeakSet<Context>();

/**
 * Middleware of a route that only reads or writes the store (track, the lists, a record): anything it throws
 * answers 503 "store unavailable" (the store's driver says more than storeAway() knows), not 500.
 */
export const storeBound: MiddlewareHandler = async function storeBound(c, next) {
  storeBoundRequests.add(c);
  await next();
};

/**
 * The app's one onError, the table of every thrown error's answer (first match wins). The front end puts
 * the same on the app it mounts the API in, for what its own middleware and pages throw.
 */
export function answerThrown(logger: Logger): ErrorHandler {
  return (error, c) => {
    // A middleware's own answer (the local runtime's bearer check, a 401 with its WWW-Authenticate).
    if (error instanceof HTTPException) return error.getResponse();
    if (error instanceof InvalidCursorError) return refuse(c, 'cursor', error.message);
    if (error instanceof UnsupportedFilterError) return fail('malformed-request', error.message);
    if (error instanceof StoreRejectedError) {
      logger.error('the store refused the record', { path: c.req.path, error });
      return fail('unstorable', error.message);
    }
    if (storeBoundRequests.has(c)) {
      logger.error('store call failed', { method: c.req.method, path: c.req.path, error });
      return fail('not-recorded', 'store unavailable; retry later');
    }
    // The database restarting, failing over or out of connections, under a route with no answer of its own for it.
    if (storeAway(error)) {
      logger.warn('store away: answered 503', { detail: (error as Error).message });
      return fail('not-recorded', 'the store is away for now; retry shortly');
    }
    logger.error('unhandled error', { error });
    return fail('internal', 'internal error');
  };
}

/** The answer to a path no route serves. */
export const noSuchRoute: NotFoundHandler = () => fail('not-found', 'no such route');
