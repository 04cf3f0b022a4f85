/**
 * The tracked operations: `POST /operations` (track), `GET /operations` (the
 * list), and one route for `GET /operations/{name}` (the record, a long poll
 * with `wait`), `{name}/history` and `{name}/decisions`: a name holds `/`.
 * A failure of the store here is the app's onError's (routes/common.ts).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { type Context, Hono } from 'hono';
import { LONG_POLL_HEADER } from '../../../core/change.ts';
import { OPERATION_KINDS, OPERATION_STATES, PROVIDERS, type ProviderName, providerOf } from '../../../core/lifecycle.ts';
import { kindOfName, normalizeOperationName } from '../../../core/names.ts';
import { type OperationRecord, trackedRecord } from '../../../core/reducer.ts';
import { timeFromDate } from '../../../core/time.ts';
import type { HistoryLog } from '../../history.ts';
import { type DecisionLog, EFFECTS_FILTERS, type OperationQueries, type OperationStore } from '../../ports.ts';
import { ListQuery, LongPollQuery, TrackRequest } from '../api-schemas.ts';
import { awsErrors, errors, GUARDED, json, LOCAL, queryParameters } from '../describe.ts';
import {
  CURSOR_SAID,
  fail,
  LIMIT_SAID,
  limit,
  type OriginAllowed,
  type Route,
  refuse,
  refuseParameter,
  sameOriginJson,
  serve,
  storeBound,
  WAIT_RANGE,
  waitMsOf,
} from './common.ts';

/** `{"name": …}` with a name of at most 512 bytes fits many times over. */
export const MAX_TRACK_BODY_BYTES = 4 * 1024;

export interface OperationsDeps {
  store: OperationStore;
  logger: Logger;
  clock?: () => Date;
  /** The list and the polling status (`GET /operations`); without it `GET /operations/{name}` answers the bare record and the list is 404. */
  queries?: OperationQueries;
  /** `GET /operations/{name}/history` (written from the stream, see lambda/history); without it the route is 400. */
  history?: Pick<HistoryLog, 'list'>;
  /** The embedded engine's decisions: `GET /operations/{name}/decisions` (without it that route is 400; in AWS decisions are log lines). */
  decisions?: DecisionLog;
  /**
   * The per-operation long poll (`GET /operations/{name}?afterVersion=N&wait=S`; the local runtime's change feed):
   * resolves true once `name` has a version past `afterVersion` (default: the version it has when called), false
   * after `waitMs` or on `signal`. It must start listening synchronously, when called: the record is read after,
   * so no change falls between. Without
   * it (API Gateway) the two parameters are ignored and the record is answered at once.
   */
  waitForVersion?: (name: string, afterVersion: number | undefined, waitMs: number, signal: AbortSignal) => Promise<boolean>;
  /**
   * Per provider, the labels of the keys reconcile polls with (GEMINI_API_KEYS, OPENAI_API_KEYS…): a track naming
   * another is refused. Undefined where this process does not know them (API Gateway: the keys are the reconcile
   * function's).
   */
  credentials?: Partial<Record<ProviderName, string[]>>;
  /**
   * Whether a browser's Origin may send a state-changing request. Default: the
   * request's own origin (API Gateway, where the routes need SigV4 anyway);
   * the local runtime passes its allow-list (local/access/guard.ts).
   */
  originAllowed?: OriginAllowed;
}

const NAME_PARAMETER = {
  name: 'name',
  in: 'path',
  required: true,
  description:
    "The operation's resource name, such as `batches/123`, `models/veo-3.0-generate-preview/operations/abc` or `interactions/xyz`. It contains `/`: send it raw or percent-encoded (`%2F`); either is read.",
  schema: { type: 'string' },
};

export const TRACK: Route = {
  method: 'post',
  path: '/operations',
  doc: () => ({
    operationId: 'track',
    tags: ['operations'],
    summary: 'Track an operation before any webhook',
    requestBody: { required: true, content: json('TrackRequest') },
    responses: {
      201: { description: 'Newly tracked: its record, `state` null.', content: json('Operation') },
      200: { description: 'Already known: the stored record.', content: json('Operation') },
      ...awsErrors('malformed-request', 'unstorable', 'payload-too-large', 'unsupported-media-type', 'rate-limited', ...GUARDED),
    },
  }),
};

export const LIST: Route = {
  method: 'get',
  path: '/operations',
  doc: () => ({
    operationId: 'listOperations',
    tags: ['operations'],
    summary: 'Operations, most recently recorded first',
    parameters: queryParameters(ListQuery, {
      state: 'Only this state.',
      kind: 'Only this kind.',
      effects: 'Only operations with an effect retrying or dead-lettered (the local runtime).',
      overdue: '`true`: only open jobs found overdue.',
      limit: 'At most this many (1-100, default 50).',
      cursor: "The previous page's `nextCursor`.",
    }),
    responses: {
      200: { description: 'A page; `nextCursor` absent on the last.', content: json('OperationList') },
      ...awsErrors('malformed-request', ...GUARDED),
    },
  }),
};

export const RECORD: Route = {
  method: 'get',
  path: '/operations/{name}',
  doc: () => ({
    operationId: 'getOperation',
    tags: ['operations'],
    summary: 'One operation, with its polling status; a long poll with `wait`',
    parameters: [
      NAME_PARAMETER,
      ...queryParameters(LongPollQuery, {
        afterVersion: `Answer once the version is past this one (default: the version it has now). ${LOCAL}`,
        wait: `Seconds to wait for that (0-60). ${LOCAL}`,
      }),
    ],
    responses: {
      200: {
        description: 'The record (at once, or once its version passed `afterVersion`, or after `wait` unchanged).',
        headers: {
          'Ratchet-Long-Poll': {
            description: 'Set by a server that waited: the seconds it would wait. Absent where the wait is not offered (AWS).',
            schema: { type: 'string' },
          },
        },
        content: json('OperationView'),
      },
      ...awsErrors('malformed-request', 'not-found', ...GUARDED),
    },
  }),
};

/** Served by RECORD's route (a name holds `/`: its last segment is read there). */
export const HISTORY: Route = {
  method: 'get',
  path: '/operations/{name}/history',
  doc: () => ({
    operationId: 'getHistory',
    tags: ['operations'],
    summary: 'Every applied write of an operation, in version order',
    parameters: [NAME_PARAMETER],
    responses: {
      200: { description: 'Its history.', content: json('History') },
      ...awsErrors('malformed-request', 'not-found', ...GUARDED),
    },
  }),
};

/** Served by RECORD's route, as HISTORY is. */
export const DECISIONS: Route = {
  method: 'get',
  path: '/operations/{name}/decisions',
  doc: () => ({
    operationId: 'getDecisions',
    tags: ['operations'],
    summary: 'Every delivery, poll and track that named the operation, and its fate',
    description: LOCAL,
    parameters: [NAME_PARAMETER],
    responses: {
      200: { description: 'Oldest first.', content: json('Decisions') },
      ...errors('malformed-request', 'not-found', ...GUARDED),
    },
  }),
};

export const OPERATIONS_ROUTES: Route[] = [TRACK, LIST, RECORD, HISTORY, DECISIONS];

/** Where a provider's keys have labels (a track's `credential` names one); Azure OpenAI's and Bedrock's have none. */
const LABELLED_KEYS: Partial<Record<ProviderName, string>> = {
  gemini: 'GEMINI_API_KEYS',
  openai: 'OPENAI_API_KEYS',
  anthropic: 'ANTHROPIC_API_KEYS',
};

/** What each parameter of `GET /operations` must be, said when it is the one refused. */
const LIST_PARAMETERS: Record<keyof typeof ListQuery.shape, string> = {
  state: `state must be one of ${OPERATION_STATES.join(', ')}`,
  kind: `kind must be one of ${OPERATION_KINDS.join(', ')}`,
  provider: `provider must be one of ${PROVIDERS.join(', ')}`,
  effects: `effects must be one of ${EFFECTS_FILTERS.join(', ')}`,
  overdue: 'overdue must be true or false',
  limit: LIMIT_SAID,
  cursor: CURSOR_SAID,
};

export function operationsRoutes(deps: OperationsDeps): Hono {
  const { store, logger, queries } = deps;
  const clock = deps.clock ?? (() => new Date());
  const app = new Hono();

  serve(app, TRACK, sameOriginJson(logger, deps.originAllowed), limit(MAX_TRACK_BODY_BYTES), storeBound, async (c) => {
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
    const kind = kindOfName(name);
    const provider = providerOf(kind);
    const known = deps.credentials && (deps.credentials[provider] ?? []);
    const variable = LABELLED_KEYS[provider];
    if (credential !== undefined && known && !known.includes(credential)) {
      return fail(
        'malformed-request',
        known.length === 0
          ? `credential ${JSON.stringify(credential)} names no key: this Ratchet polls ${provider} with one key or none${variable ? ` (${variable} is not set)` : ' (its keys have no labels)'}`
          : `credential ${JSON.stringify(credential)} names no key: ${variable} has ${known.map((l) => JSON.stringify(l)).join(', ')}`,
      );
    }
    // A job tracked with no label is polled with the first key: its record says so.
    const record = trackedRecord(name, kind, timeFromDate(clock()), metadata, credential ?? known?.[0]);
    const written = await store.write(record, undefined);
    if (!written.ok) {
      // Known already: a webhook or discovery got there first (a create and its track race them). The metadata the
      // track brings is kept where the record has none, as a write of its own; what the record has stays.
      const current = written.current;
      if (!current || !metadata || current.userMetadata) return c.json(current, 200);
      const { resultWrite: _, ...kept } = current;
      const next: OperationRecord = {
        ...kept,
        userMetadata: metadata,
        version: current.version + 1,
        previousState: current.state,
        stateChanged: false,
        source: 'track',
        eventId: null,
        recordedAt: timeFromDate(clock()),
      };
      const merged = await store.write(next, current.version);
      return c.json(merged.ok ? next : (merged.current ?? current), 200);
    }
    logger.info('operation tracked', { operation: name });
    return c.json(record, 201);
  });

  if (queries) {
    serve(app, LIST, storeBound, async (c) => {
      const query = ListQuery.safeParse(c.req.query());
      if (!query.success) return refuseParameter(c, query.error, LIST_PARAMETERS);
      const { state, kind, provider, effects, overdue, limit, cursor } = query.data;
      const filter = { state, kind, provider, effects, ...(overdue === 'true' && { overdue: true }), limit: limit ?? 50, cursor };
      return c.json(await queries.list(filter));
    });
  }

  // `{name}`, `{name}/history`, `{name}/decisions`: a path that is a whole name is the record (`batches/history`
  // is a batch), else a name followed by `/history` or `/decisions` is that operation's history or decisions.
  serve(app, RECORD, storeBound, async (c) => {
    const path = c.req.param('name') as string;
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
    const record = await read();
    if (!record) return fail('not-found', `no operation named ${JSON.stringify(name)}`);
    if (view === 'history' && deps.history) return c.json({ name, history: await deps.history.list(name) });
    if (view === 'decisions' && deps.decisions) return c.json({ name, decisions: await deps.decisions.decisions(name) });
    return c.json(record);
  });

  return app;
}

/** Answers once the version passes `afterVersion` (default: the version read now), or after `waitMs` with the record unchanged. */
async function longPoll(
  c: Context,
  name: string,
  wait: { afterVersion?: number; waitMs: number },
  read: () => Promise<OperationRecord | undefined>,
  waitForVersion: NonNullable<OperationsDeps['waitForVersion']>,
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
  } finally {
    stop.abort();
    c.req.raw.signal.removeEventListener('abort', abort);
  }
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
