/**
 * The change feed's routes (the local runtime's; behind the API token like
 * every route but the webhook and /healthz):
 *
 *   GET /changes?after=&wait=&name=&kind=&state=&limit=   a long poll: changes past `after`, at once when
 *                                                          there are some, else after `wait` s with none
 *   GET /changes/stream?after=&name=&kind=&state=         the same changes as Server-Sent Events
 *
 * Without `after` a reader starts at the feed's head (what changes from now
 * on). Bad input is a 400 naming its field; a cursor the feed no longer holds
 * is a 410 with the oldest one still good.
 */
import type { ServerResponse } from 'node:http';
import { type Context, Hono } from 'hono';
import { type SSEStreamingApi, streamSSE } from 'hono/streaming';
import * as z from 'zod/mini';
import { FAILURES, type Failure, failureBody } from '../../../core/failures.ts';
import { OPERATION_KINDS, OPERATION_STATES, PROVIDERS } from '../../../core/lifecycle.ts';
import { normalizeOperationName } from '../../../core/names.ts';
import { type ChangeFeedPort, CursorExpiredError, type FeedFilter, type OperationChange } from '../../feed.ts';
import { FEED_MAX_LIMIT, FeedQuery as FeedParameters } from '../api-schemas.ts';
import { errors, GUARDED, json, LOCAL, queryParameters } from '../describe.ts';
import { type Route, serve, WAIT_RANGE, waitMsOf } from './common.ts';

const FEED_FILTERS = {
  after: 'A cursor this feed returned: the changes committed after it. Without it, the feed head (changes from now on).',
  name: 'Only this operation.',
  kind: 'Only this kind.',
  provider: "Only this provider's jobs (its kinds).",
  state: 'Only changes that wrote this state.',
};

/** The parameters `fields` of the feed's query, described. */
const feedQuery = (fields: (keyof typeof FeedParameters.shape)[]) =>
  queryParameters(z.object(Object.fromEntries(fields.map((field) => [field, FeedParameters.shape[field]]))), {
    ...FEED_FILTERS,
    wait: 'Seconds to wait for a change when there is none yet (0-60, fractions allowed).',
    limit: 'At most this many changes (1-1,000).',
  });

export const CHANGES: Route = {
  method: 'get',
  path: '/changes',
  doc: () => ({
    operationId: 'changes',
    tags: ['change feed'],
    summary: 'The change feed: changes committed after a cursor, in commit order (a long poll)',
    description: `${LOCAL} Always go on from the \`cursor\` returned.`,
    parameters: feedQuery(['after', 'wait', 'name', 'kind', 'provider', 'state', 'limit']),
    responses: {
      200: { description: 'The changes (none after `wait` seconds) and the cursor to go on from.', content: json('ChangesPage') },
      ...errors('malformed-request', 'cursor-expired', ...GUARDED),
    },
  }),
};

export const CHANGE_STREAM: Route = {
  method: 'get',
  path: '/changes/stream',
  doc: () => ({
    operationId: 'changeStream',
    tags: ['change feed'],
    summary: 'The change feed as Server-Sent Events',
    description: `${LOCAL} Events: \`change\` (\`id\` the change's cursor, \`data\` a Change), \`dropped\` and \`expired\` (\`data\` an Error; the stream then ends: reconnect with the last id). A \`: keep-alive\` comment while idle.`,
    parameters: [
      ...feedQuery(['after', 'name', 'kind', 'provider', 'state']),
      {
        name: 'Last-Event-ID',
        in: 'header',
        required: false,
        description: 'The last id seen (what EventSource sends when it reconnects): wins over `after`.',
        schema: { type: 'string' },
      },
    ],
    responses: {
      200: { description: 'The stream.', content: { 'text/event-stream': { schema: { type: 'string' } } } },
      ...errors('malformed-request', 'cursor-expired', ...GUARDED),
    },
  }),
};

export const CHANGES_ROUTES: Route[] = [CHANGES, CHANGE_STREAM];

/** How long a stream gathers changes after a write before its next one (its lag pays it at most once). */
const GATHER_MS = 10;
const DEFAULT_LIMIT = 100;

export interface ChangesOptions {
  feed: ChangeFeedPort;
  /** A comment line on an idle stream this often. */
  keepAliveMs: number;
  /** A stream whose reader takes nothing for this long is sent `dropped` and closed. */
  stallMs: number;
}

interface FeedQuery {
  after: string | undefined;
  waitMs: number;
  filter: FeedFilter;
  limit: number;
}

class BadQuery extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

const respond = (c: Context, failure: Failure, body: Record<string, unknown>) => c.json(body, FAILURES[failure] as 400);
/** A 410's body, and a stream's last `expired` event: why, and the oldest cursor still good. */
const expiredBody = (error: CursorExpiredError) => ({ ...failureBody('cursor-expired', error.message), oldestCursor: error.oldestCursor });

export function changesRoutes(options: ChangesOptions): Hono {
  const { feed } = options;
  const app = new Hono();
  const parsed = (c: Context, fields: string[], cursor?: string): FeedQuery | Response => {
    try {
      return parseQuery(feed, c.req.query(), fields, cursor);
    } catch (error) {
      if (error instanceof BadQuery)
        return respond(c, 'malformed-request', { ...failureBody('malformed-request', error.message), field: error.field });
      if (error instanceof CursorExpiredError) return expired(c, error);
      throw error;
    }
  };
  const expired = (c: Context, error: CursorExpiredError) => respond(c, 'cursor-expired', expiredBody(error));

  serve(app, CHANGES, async (c) => {
    const query = parsed(c, ['after', 'wait', 'name', 'kind', 'provider', 'state', 'limit']);
    if (query instanceof Response) return query;
    try {
      const page = await feed.next(query.after, query.filter, query.limit, query.waitMs, c.req.raw.signal);
      return c.json({ changes: page.changes, cursor: page.cursor });
    } catch (error) {
      if (error instanceof CursorExpiredError) return expired(c, error);
      throw error;
    }
  });

  serve(app, CHANGE_STREAM, async (c) => {
    // The browser's EventSource sends the last id it saw when it reconnects: that wins over the URL's `after`.
    const query = parsed(c, ['after', 'name', 'kind', 'provider', 'state'], c.req.header('last-event-id'));
    if (query instanceof Response) return query;
    try {
      // Refused before the stream starts (a 410, not an event), like the long poll.
      if (query.after !== undefined) await feed.check(query.after);
    } catch (error) {
      if (error instanceof CursorExpiredError) return expired(c, error);
      throw error;
    }
    const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
    /**
     * A stalled reader's last event: written past the stream (whose queue is full) straight after what the
     * connection already holds, which ends there. Buffered: one small event. A reader that never takes it is
     * closed under it after another stall (30 s at least).
     */
    const cutOff = (text: string) => {
      if (!outgoing || outgoing.writableEnded) return;
      outgoing.end(text);
      setTimeout(
        () => {
          if (!outgoing.writableFinished) outgoing.destroy();
        },
        Math.max(options.stallMs, 30_000),
      ).unref();
    };
    return streamSSE(c, (stream) => serveStream(stream, feed, query, options, cutOff));
  });
  return app;
}

async function serveStream(
  stream: SSEStreamingApi,
  feed: ChangeFeedPort,
  query: FeedQuery,
  options: ChangesOptions,
  cutOff: (text: string) => void,
): Promise<void> {
  const stop = new AbortController();
  stream.onAbort(() => stop.abort());
  /** Whether the reader took `write` within the stall limit. */
  const taken = (write: Promise<unknown>) =>
    new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), options.stallMs);
      void write.then(() => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  let cursor = query.after ?? (await feed.headCursor());
  /** The stream's last event (it then closes): through the stream while the reader takes it, else past it. */
  const last = async (event: string, body: Record<string, unknown>, stalled = false) => {
    const text = `event: ${event}\ndata: ${JSON.stringify(body)}\n\n`;
    if (stalled || !(await taken(stream.write(text)))) {
      stop.abort();
      cutOff(text);
      stream.abort();
    }
  };
  // No cursor in it: what the connection still held may or may not have reached the reader; its own last id says.
  const slowReader = (message: string) => last('dropped', { error: 'slow-reader', message }, true);
  while (!stop.signal.aborted) {
    let page: Awaited<ReturnType<ChangeFeedPort['next']>>;
    try {
      page = await feed.next(cursor, query.filter, DEFAULT_LIMIT, options.keepAliveMs, stop.signal);
    } catch (error) {
      if (error instanceof CursorExpiredError) {
        await last('expired', expiredBody(error));
      } else {
        await last('dropped', {
          error: 'not-recorded',
          message: 'the feed cannot be read now: reconnect with your last id (Last-Event-ID)',
        });
      }
      return;
    }
    if (stop.signal.aborted) return;
    if (page.changes.length === 0 && !(await taken(stream.write(': keep-alive\n\n')))) {
      await slowReader('the reader took nothing for too long: reconnect with your last id (Last-Event-ID) to go on');
      return;
    }
    // One write for the page: each event whole, in order.
    if (page.changes.length > 0 && !(await taken(stream.write(page.changes.map(frameOf).join(''))))) {
      await slowReader('the reader fell too far behind: reconnect with your last id (Last-Event-ID) to go on');
      return;
    }
    cursor = page.cursor;
    // Under a stream of changes, the next few milliseconds' go out in one write, not one write each.
    if (page.changes.length > 0) await new Promise((resolve) => setTimeout(resolve, GATHER_MS));
  }
}

/** A change as one SSE event; made once per change, however many streams send it (the feed hands them one object). */
const frames = new WeakMap<OperationChange, string>();
function frameOf(change: OperationChange): string {
  let frame = frames.get(change);
  if (frame === undefined) {
    frame = `event: change\nid: ${change.cursor}\ndata: ${JSON.stringify(change)}\n\n`;
    frames.set(change, frame);
  }
  return frame;
}

function parseQuery(feed: ChangeFeedPort, raw: Record<string, string>, fields: string[], lastEventId?: string): FeedQuery {
  /** One parameter, by the schema the description gives it (app/http/api-schemas.ts). */
  const field = <K extends 'limit' | 'kind' | 'provider' | 'state'>(key: K, message: string) => {
    const parsed = FeedParameters.shape[key].safeParse(raw[key]);
    if (!parsed.success || parsed.data === undefined) throw new BadQuery(key, message);
    return parsed.data as NonNullable<z.output<(typeof FeedParameters.shape)[K]>>;
  };
  for (const key of Object.keys(raw)) {
    if (!fields.includes(key))
      throw new BadQuery(key, `unknown parameter ${JSON.stringify(key.slice(0, 40))}: expected ${fields.join(', ')}`);
  }
  const cursorText = lastEventId || raw.after;
  if (cursorText !== undefined && !feed.isCursor(cursorText))
    throw new BadQuery(lastEventId ? 'Last-Event-ID' : 'after', 'after must be a cursor this feed returned');
  const after = cursorText;
  const waitMs = waitMsOf(raw.wait);
  if (waitMs === undefined) throw new BadQuery('wait', WAIT_RANGE);
  const limit = raw.limit === undefined ? DEFAULT_LIMIT : field('limit', `limit must be a whole number from 1 to ${FEED_MAX_LIMIT}`);
  const filter: FeedFilter = {};
  if (raw.name !== undefined) {
    try {
      filter.name = normalizeOperationName(raw.name);
    } catch (error) {
      throw new BadQuery('name', `name: ${(error as Error).message}`);
    }
  }
  if (raw.kind !== undefined) filter.kind = field('kind', `kind must be one of ${OPERATION_KINDS.join(', ')}`);
  if (raw.provider !== undefined) filter.provider = field('provider', `provider must be one of ${PROVIDERS.join(', ')}`);
  if (raw.state !== undefined) filter.state = field('state', `state must be one of ${OPERATION_STATES.join(', ')}`);
  return { after, waitMs, filter, limit };
}
