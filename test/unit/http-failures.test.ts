/**
 * What the HTTP API answers when what a route calls throws: the app's one
 * onError (app/http/routes/common.ts). A route that only reads or writes the
 * store answers 503 "store unavailable" whatever its store throws; any other
 * route answers 503 "the store is away" for a store away and 500 otherwise;
 * a list's bad cursor or filter and a record the store refuses are the
 * client's. Each answer whole: status, body and headers.
 */
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { ChangeFeedPort } from '../../app/feed.ts';
import { createApp, withLocalRoutes } from '../../app/http/app.ts';
import { answerThrown, noSuchRoute } from '../../app/http/routes/common.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { InvalidCursorError, StoreRejectedError, UnsupportedFilterError } from '../../app/ports.ts';
import { AccessGuard } from '../../local/access/guard.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { silentLogger } from '../support/silent-logger.ts';

/** What a database gone for now throws (a connection refused): storeAway() knows it. */
const away = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
const broken = () => new Error('something unforeseen');

/** The API with every route, each of its calls throwing what `thrown` makes. */
function throwingApp(thrown: () => Error) {
  const fails = async (): Promise<never> => {
    throw thrown();
  };
  const store = new MemoryStore();
  store.write = fails;
  store.listUnprocessable = fails;
  const api = createApp({
    store,
    receipts: store,
    unprocessable: store,
    queries: { list: fails, describe: fails },
    history: { list: fails },
    decisions: { decisions: fails },
    waitForVersion: async () => false,
    verifier: new WebhookSignatureVerifier(async () => ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw']),
    logger: silentLogger,
  });
  return withLocalRoutes(api, {
    logger: silentLogger,
    changes: {
      feed: { isCursor: () => true, next: fails, check: fails, headCursor: fails } as unknown as ChangeFeedPort,
      keepAliveMs: 1_000,
      stallMs: 1_000,
    },
    effectsAdmin: {
      effects: { deadLetters: { list: fails, listUndecodable: fails } } as never,
      redrive: fails,
    },
    exposition: { contentType: 'text/plain', scrape: fails },
  });
}

async function answer(app: Hono, method: string, path: string, body?: unknown) {
  const response = await app.request(path, {
    method,
    headers: { 'content-type': 'application/json' },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return { status: response.status, headers: Object.fromEntries(response.headers), body: await response.text() };
}

const json = { 'content-type': 'application/json' };
const unavailable = {
  status: 503,
  headers: { ...json, 'retry-after': '1' },
  body: '{"error":"not-recorded","message":"store unavailable; retry later"}',
};
const storeAway = {
  status: 503,
  headers: { ...json, 'retry-after': '1' },
  body: '{"error":"not-recorded","message":"the store is away for now; retry shortly"}',
};
const internal = { status: 500, headers: json, body: '{"error":"internal","message":"internal error"}' };

/** The routes whose whole work is the store's, as a client asks them. */
const STORE_ROUTES: Array<[string, string, unknown?]> = [
  ['POST', '/operations', { name: 'batches/b1' }],
  ['GET', '/operations'],
  ['GET', '/decisions'],
  ['GET', '/operations/batches/b1'],
  ['GET', '/operations/batches/b1/history'],
  ['GET', '/operations/batches/b1/decisions'],
  ['GET', '/operations/batches/b1?wait=1'],
];
/** The routes that answer anything else themselves. */
const OTHER_ROUTES: Array<[string, string]> = [
  ['GET', '/effects/dead-letters'],
  ['GET', '/changes'],
  ['GET', '/metrics'],
];

describe('what a route answers when what it calls throws', () => {
  it.each(STORE_ROUTES)('%s %s: 503 store unavailable, whatever the store throws', async (method, path, body) => {
    for (const thrown of [broken, away]) expect(await answer(throwingApp(thrown), method, path, body)).toEqual(unavailable);
  });

  it.each(OTHER_ROUTES)('%s %s: 503 the store is away for a store away, else 500 internal', async (method, path) => {
    expect(await answer(throwingApp(away), method, path)).toEqual(storeAway);
    expect(await answer(throwingApp(broken), method, path)).toEqual(internal);
  });

  it("answers a list's bad cursor and filter, and a record the store refuses, as the client's", async () => {
    const cursor = throwingApp(() => new InvalidCursorError('cursor is not one this list handed out'));
    const refusedCursor = {
      status: 400,
      headers: json,
      body: '{"error":"malformed-request","message":"cursor is not one this list handed out","field":"cursor"}',
    };
    expect(await answer(cursor, 'GET', '/operations?cursor=x')).toEqual(refusedCursor);
    expect(await answer(cursor, 'GET', '/decisions?cursor=x')).toEqual(refusedCursor);
    expect(
      await answer(
        throwingApp(() => new UnsupportedFilterError('overdue is not filtered here')),
        'GET',
        '/operations',
      ),
    ).toEqual({
      status: 400,
      headers: json,
      body: '{"error":"malformed-request","message":"overdue is not filtered here"}',
    });
    expect(
      await answer(
        throwingApp(() => new StoreRejectedError('item size has exceeded the maximum')),
        'POST',
        '/operations',
        { name: 'batches/b1' },
      ),
    ).toEqual({ status: 400, headers: json, body: '{"error":"unstorable","message":"item size has exceeded the maximum"}' });
  });

  it('answers a path no route serves 404, and a redrive the derived-work process did not answer 503 with its reason', async () => {
    const app = throwingApp(() => new Error('the derived-work process is restarting'));
    expect(await answer(app, 'GET', '/nowhere')).toEqual({
      status: 404,
      headers: json,
      body: '{"error":"not-found","message":"no such route"}',
    });
    expect(await answer(app, 'POST', '/effects/redrive', {})).toEqual({
      status: 503,
      headers: { ...json, 'retry-after': '1' },
      body: '{"error":"not-recorded","message":"the derived-work process is restarting"}',
    });
  });

  it('answers the same mounted inside a front end with its guard (local/open.ts), which judges a path no route serves first', async () => {
    const token = 'a-token-of-at-least-32-characters-0123';
    const outer = new Hono();
    new AccessGuard({ tokens: [token], publicUrls: [], trackRatePerMinute: 60, logger: silentLogger }).install(outer);
    outer.route('/', throwingApp(broken));
    outer.notFound(noSuchRoute);
    outer.onError(answerThrown(silentLogger));
    const ask = async (path: string, authorization?: string) => {
      const response = await outer.request(`http://127.0.0.1${path}`, {
        headers: { host: '127.0.0.1', ...(authorization && { authorization }) },
      });
      return { status: response.status, body: await response.text(), retryAfter: response.headers.get('retry-after') };
    };
    expect(await ask('/nowhere')).toMatchObject({ status: 401 });
    expect(await ask('/nowhere', 'Bearer not-the-token-of-this-ratchet-at-all')).toMatchObject({ status: 401 });
    expect(await ask('/nowhere', `Bearer ${token}`)).toEqual({
      status: 404,
      body: '{"error":"not-found","message":"no such route"}',
      retryAfter: null,
    });
    expect(await ask('/operations', `Bearer ${token}`)).toEqual({ status: 503, body: unavailable.body, retryAfter: '1' });
    expect(await ask('/metrics', `Bearer ${token}`)).toEqual({ status: 500, body: internal.body, retryAfter: null });
  });
});
