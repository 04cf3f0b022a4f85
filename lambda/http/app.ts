/**
 * The HTTP API, one Hono app for API Gateway (via hono/aws-lambda) and for the
 * local runtime (via @hono/node-server). Handlers are thin: parse, call one
 * use case, shape the response.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import * as z from 'zod/mini';
import { MalformedEventError, mapWebhookDelivery } from '../core/gemini-webhook.ts';
import { OPERATION_KINDS, OPERATION_STATES, type OperationKind } from '../core/lifecycle.ts';
import { InvalidNameError, kindOfName, normalizeOperationName } from '../core/names.ts';
import { parseProviderJson } from '../core/provider-values.ts';
import { type OperationEvent, trackedRecord } from '../core/reducer.ts';
import { InvalidTimeError, timeFromDate } from '../core/time.ts';
import type { HistoryLog } from '../history/history.ts';
import { type IngestDeps, ingest, NotRecordedError, RecentRecords } from '../ingest.ts';
import {
  type DecisionLog,
  type DeliveryReceipts,
  InvalidCursorError,
  type OperationQueries,
  type OperationStore,
  StoreRejectedError,
} from '../store/operation-store.ts';
import { NotConfiguredError, type WebhookSignatureVerifier } from './webhook-signature.ts';

export const MAX_WEBHOOK_BODY_BYTES = 256 * 1024;
/** `{"name": …}` with a name of at most 512 bytes fits many times over. */
export const MAX_TRACK_BODY_BYTES = 4 * 1024;

export interface AppDeps {
  store: OperationStore;
  verifier: WebhookSignatureVerifier;
  /** The list and the polling status (`GET /operations`); without it `GET /operations/{name}` answers the bare record and the list is 404. */
  queries?: OperationQueries;
  /** `GET /operations/{name}/history` (written from the stream, see lambda/history); without it the route is 400. */
  history?: Pick<HistoryLog, 'list'>;
  /** `GET /operations/{name}/decisions` (the embedded engine keeps them); without it the route is 400. */
  decisions?: DecisionLog;
  /** Notes verified deliveries that name no operation (Gemini's ping), for `npm run connect`. */
  receipts?: DeliveryReceipts;
  logger: Logger;
  /** Counts each webhook decision (`WebhookApplied`, `WebhookTerminalConflict`, …). */
  metrics?: Metrics;
  clock?: () => Date;
  ingest?: Omit<IngestDeps, 'store' | 'clock'>;
  /**
   * Dynamic-webhook deliveries signed with a JWT (which does not cover the
   * body) are never applied from their body: the operation they name is polled
   * instead. Without this they are answered 503 (nothing here can poll).
   */
  pollNow?: (operation: { name: string; kind: OperationKind }) => Promise<'scheduled' | 'terminal'>;
  /** Whether the store answers (the local runtime); without it `/healthz` reports the process only. */
  health?: () => Promise<'ok' | 'unavailable'>;
  /** Routes only one runtime has (the local runtime's effects admin), with the app's helpers. */
  extraRoutes?: (app: Hono, helpers: { sameOriginJson: MiddlewareHandler; fail: (failure: Failure, message: string) => Response }) => void;
}

/** Every failure the API answers, and its status: one table to read. */
const FAILURES = {
  'payload-too-large': 413,
  'unsupported-media-type': 415,
  /** A browser page from another origin: refused, so no web page can drive the runtime. */
  'foreign-origin': 403,
  'invalid-signature': 401,
  'malformed-request': 400,
  /** The store refused the event for good (e.g. DynamoDB's ValidationException): a retry would fail the same way. */
  unstorable: 400,
  'not-recorded': 503,
  /** No usable signing secret yet: Gemini retries for 24 h, so nothing is lost while setup finishes. */
  'not-configured': 503,
  /** The published keys for dynamic-webhook signatures cannot be fetched: the delivery cannot be judged now. */
  'keys-unavailable': 503,
  'not-found': 404,
  internal: 500,
} as const satisfies Record<string, ContentfulStatusCode>;
export type Failure = keyof typeof FAILURES;

/** `metadata`: the application's own labels for the job (as Gemini's `user_metadata`), carried on its record and its effects. */
const TrackRequest = z.object({ name: z.string(), metadata: z.optional(z.record(z.string(), z.unknown())) });
const ListQuery = z.object({
  state: z.optional(z.enum(OPERATION_STATES)),
  kind: z.optional(z.enum(OPERATION_KINDS)),
  limit: z.optional(z.coerce.number().check(z.int(), z.minimum(1), z.maximum(100))),
  cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(2_048))),
});

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
  const { store, verifier, logger, metrics } = deps;
  const count = (metric: string) => {
    if (!metrics) return;
    metrics.addMetric(metric, MetricUnit.Count, 1);
    metrics.publishStoredMetrics();
  };
  const clock = deps.clock ?? (() => new Date());
  // Per process (a Lambda instance): which write variant an operation's next event likely needs.
  const hints = new RecentRecords();
  const app = new Hono();
  const fail = (failure: Failure, message: string) =>
    new Response(JSON.stringify({ error: failure, message }), {
      status: FAILURES[failure],
      headers: { 'content-type': 'application/json' },
    });

  app.get('/healthz', async (c) =>
    (await deps.health?.()) === 'unavailable' ? c.json({ status: 'degraded', store: 'unavailable' }, 503) : c.json({ status: 'ok' }),
  );

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

  app.post('/webhooks/gemini', limit(MAX_WEBHOOK_BODY_BYTES), async (c) => {
    const raw = await c.req.text();
    let verification: Awaited<ReturnType<WebhookSignatureVerifier['verify']>>;
    try {
      verification = await verifier.verify(raw, c.req.raw.headers);
    } catch (error) {
      if (!(error instanceof NotConfiguredError)) throw error;
      count('WebhookNotConfigured');
      return fail('not-configured', `${error.message}; retry later`);
    }
    if (!verification.ok && verification.status === 'keys-unavailable') {
      logger.error('webhook not judged: signing keys unavailable', { reason: verification.reason });
      count('WebhookKeysUnavailable');
      return fail('keys-unavailable', verification.reason);
    }
    if (!verification.ok) {
      logger.warn('webhook rejected', { decision: 'rejected', reason: verification.reason });
      count('WebhookRejected');
      return fail('invalid-signature', verification.reason);
    }
    const deliveryId = verification.id;
    let mapping: ReturnType<typeof mapWebhookDelivery>;
    try {
      mapping = mapWebhookDelivery(parseProviderJson(raw), deliveryId);
    } catch (error) {
      if (
        error instanceof SyntaxError ||
        error instanceof MalformedEventError ||
        error instanceof InvalidTimeError ||
        error instanceof InvalidNameError
      ) {
        const message = error instanceof SyntaxError ? `body is not JSON: ${error.message}` : error.message;
        logger.warn('webhook rejected', { decision: 'rejected', reason: 'malformed', webhookId: deliveryId, detail: message });
        count('WebhookRejected');
        return fail('malformed-request', message);
      }
      throw error;
    }
    if (mapping.kind === 'ignored') {
      logger.info('webhook ignored', { decision: 'ignored', reason: 'unknown-event-type', type: mapping.type, webhookId: deliveryId });
      try {
        const receivedAt = clock().toISOString();
        await deps.receipts?.recordUnmapped({ type: mapping.type.slice(0, 100), webhookId: deliveryId, receivedAt });
      } catch (error) {
        // Only a note for setup tools: the delivery itself is answered all the same.
        logger.warn('unmapped delivery not noted', { webhookId: deliveryId, detail: (error as Error).message });
      }
      return c.json({ applied: false, reason: 'unknown-event-type' });
    }
    const { event } = mapping;
    if (verification.scheme === 'jwt') return verifyByPoll(event, deliveryId);
    try {
      const result = await ingest({ ...event, scheme: verification.scheme }, { hints, ...deps.ingest, store, clock });
      const log = {
        decision: result.outcome,
        webhookId: deliveryId,
        operation: event.name,
        eventState: event.state,
        attempts: result.attempts,
      };
      if (result.outcome === 'applied') {
        count('WebhookApplied');
        logger.info('webhook applied', {
          ...log,
          state: result.record.state,
          version: result.record.version,
          stateChanged: result.stateChanged,
        });
        return c.json({ applied: true, operation: result.record });
      }
      // A second terminal state for one operation is a provider anomaly: surface it, never apply it.
      const conflict = result.reason === 'terminal-conflict';
      count(conflict ? 'WebhookTerminalConflict' : 'WebhookDiscarded');
      const level = conflict ? 'warn' : 'info';
      logger[level]('webhook discarded', {
        ...log,
        reason: result.reason,
        storedState: result.record.state,
        version: result.record.version,
      });
      return c.json({ applied: false, reason: result.reason, operation: result.record });
    } catch (error) {
      if (error instanceof StoreRejectedError) {
        count('WebhookUnstorable');
        logger.error('webhook refused by the store', {
          decision: 'unstorable',
          webhookId: deliveryId,
          operation: event.name,
          error: error.message,
        });
        return fail('unstorable', `${error.message}; this delivery will never be recorded, do not retry it`);
      }
      if (!(error instanceof NotRecordedError)) throw error;
      count('WebhookNotRecorded');
      logger.error('webhook not recorded', {
        decision: 'not-recorded',
        reason: error.reason,
        webhookId: deliveryId,
        operation: event.name,
        error: error.cause,
      });
      return fail('not-recorded', `event not recorded (${error.reason}); retry later`);
    }
  });

  /** The body named the operation, nothing more: what Gemini answers a poll is what gets recorded. */
  async function verifyByPoll(event: OperationEvent, deliveryId: string): Promise<Response> {
    if (!deps.pollNow) {
      count('WebhookNotConfigured');
      return fail('not-configured', 'a JWT-signed delivery is verified by polling Gemini, and polling is not configured here; retry later');
    }
    try {
      const at = timeFromDate(clock());
      const outcome = await deps.pollNow({ name: event.name, kind: event.kind });
      count('WebhookVerifyingByPoll');
      await deps.decisions
        ?.note?.(event.name, {
          at,
          source: 'webhook',
          eventId: deliveryId,
          state: event.state,
          updateTime: event.updateTime ?? null,
          verdict: 'verifying-by-poll',
          scheme: 'jwt',
        })
        .catch((error: Error) => logger.warn('decision not noted', { webhookId: deliveryId, detail: error.message }));
      logger.info('webhook verified by poll', { decision: 'verifying-by-poll', webhookId: deliveryId, operation: event.name, outcome });
      return Response.json({ applied: false, reason: 'verifying-by-poll' });
    } catch (error) {
      if (error instanceof StoreRejectedError) return fail('unstorable', error.message);
      logger.error('webhook not recorded', { decision: 'not-recorded', reason: 'poll-request-failed', webhookId: deliveryId, error });
      count('WebhookNotRecorded');
      return fail('not-recorded', 'could not ask for the poll; retry later');
    }
  }

  // Not a "simple" request a page could send cross-site: JSON only, from no browser or from this origin.
  const sameOriginJson: MiddlewareHandler = async (c, next) => {
    const origin = c.req.header('origin');
    if (origin !== undefined && !sameOrigin(origin, c.req.url)) {
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
    try {
      const request = TrackRequest.safeParse(await c.req.json());
      if (!request.success) return fail('malformed-request', 'body must be {"name": "<operation name>", "metadata"?: {…}}');
      name = normalizeOperationName(request.data.name);
      metadata = request.data.metadata;
    } catch (error) {
      return fail('malformed-request', (error as Error).message);
    }
    try {
      const record = trackedRecord(name, kindOfName(name), timeFromDate(clock()), metadata);
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
      if (!query.success) {
        return fail(
          'malformed-request',
          `state must be one of ${OPERATION_STATES.join(', ')}; kind one of ${OPERATION_KINDS.join(', ')}; limit 1-100`,
        );
      }
      const { state, kind, limit, cursor } = query.data;
      try {
        return c.json(await queries.list({ state, kind, limit: limit ?? 50, cursor }));
      } catch (error) {
        if (error instanceof InvalidCursorError) return fail('malformed-request', error.message);
        logger.error('list failed', { error });
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
    try {
      const record = await (queries ? queries.describe(name) : store.get(name));
      if (!record) return fail('not-found', `no operation named ${JSON.stringify(name)}`);
      if (view === 'history' && deps.history) return c.json({ name, history: await deps.history.list(name) });
      if (view === 'decisions' && deps.decisions) return c.json({ name, decisions: await deps.decisions.decisions(name) });
      return c.json(record);
    } catch (error) {
      logger.error('read failed', { operation: name, error });
      return fail('not-recorded', 'store unavailable; retry later');
    }
  });

  deps.extraRoutes?.(app, { sameOriginJson, fail });
  app.notFound(() => fail('not-found', 'no such route'));
  app.onError((error) => {
    logger.error('unhandled error', { error });
    return fail('internal', 'internal error');
  });
  return app;
}
