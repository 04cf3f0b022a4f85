/**
 * The HTTP API, one Hono app for API Gateway (via hono/aws-lambda) and for the
 * local runtime (via @hono/node-server). Handlers are thin: parse, call one
 * use case, shape the response.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { type Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { z } from 'zod';
import { MalformedEventError, mapWebhookDelivery } from '../core/gemini-webhook.ts';
import { InvalidNameError, kindOfName, normalizeOperationName } from '../core/names.ts';
import { trackedRecord } from '../core/reducer.ts';
import { InvalidTimeError, timeFromDate } from '../core/time.ts';
import { type IngestDeps, ingest, NotRecordedError } from '../ingest.ts';
import type { OperationStore } from '../store/operation-store.ts';
import type { WebhookSignatureVerifier } from './webhook-signature.ts';

export const MAX_WEBHOOK_BODY_BYTES = 256 * 1024;

export interface AppDeps {
  store: OperationStore;
  verifier: WebhookSignatureVerifier;
  logger: Logger;
  /** Counts each webhook decision (`WebhookApplied`, `WebhookTerminalConflict`, …). */
  metrics?: Metrics;
  clock?: () => Date;
  ingest?: Omit<IngestDeps, 'store' | 'clock'>;
}

/** Every failure the API answers, and its status: one table to read. */
const FAILURES = {
  'payload-too-large': 413,
  'invalid-signature': 401,
  'malformed-request': 400,
  'not-recorded': 503,
  'not-found': 404,
  internal: 500,
} as const satisfies Record<string, ContentfulStatusCode>;
type Failure = keyof typeof FAILURES;

const TrackRequest = z.object({ name: z.string() });

export function createApp(deps: AppDeps): Hono {
  const { store, verifier, logger, metrics } = deps;
  const count = (metric: string) => {
    if (!metrics) return;
    metrics.addMetric(metric, MetricUnit.Count, 1);
    metrics.publishStoredMetrics();
  };
  const clock = deps.clock ?? (() => new Date());
  const app = new Hono();
  const fail = (failure: Failure, message: string) =>
    new Response(JSON.stringify({ error: failure, message }), {
      status: FAILURES[failure],
      headers: { 'content-type': 'application/json' },
    });

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.post(
    '/webhooks/gemini',
    bodyLimit({
      maxSize: MAX_WEBHOOK_BODY_BYTES,
      onError: () => {
        const response = fail('payload-too-large', `body exceeds ${MAX_WEBHOOK_BODY_BYTES} bytes`);
        // The rest of the body is never read: a client must not reuse this connection.
        response.headers.set('connection', 'close');
        return response;
      },
    }),
    async (c) => {
      const raw = await c.req.text();
      const verification = await verifier.verify(raw, c.req.raw.headers);
      if (!verification.ok) {
        logger.warn('webhook rejected', { decision: 'rejected', reason: verification.reason });
        count('WebhookRejected');
        return fail('invalid-signature', verification.reason);
      }
      const deliveryId = verification.id;
      let mapping: ReturnType<typeof mapWebhookDelivery>;
      try {
        mapping = mapWebhookDelivery(JSON.parse(raw), deliveryId);
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
        return c.json({ applied: false, reason: 'unknown-event-type' });
      }
      const { event } = mapping;
      try {
        const result = await ingest(event, { ...deps.ingest, store, clock });
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
    },
  );

  app.post('/operations', async (c) => {
    let name: string;
    try {
      name = normalizeOperationName(TrackRequest.parse(await c.req.json()).name);
    } catch (error) {
      const message = error instanceof z.ZodError ? 'body must be {"name": "<operation name>"}' : (error as Error).message;
      return fail('malformed-request', message);
    }
    try {
      const record = trackedRecord(name, kindOfName(name), timeFromDate(clock()));
      const written = await store.write(record, undefined);
      if (written.ok) {
        logger.info('operation tracked', { operation: name });
        return c.json(record, 201);
      }
      return c.json(written.current, 200);
    } catch (error) {
      logger.error('track failed', { operation: name, error });
      return fail('not-recorded', 'store unavailable; retry later');
    }
  });

  app.get('/operations/:name{.+}', async (c) => {
    let name: string;
    try {
      name = normalizeOperationName(c.req.param('name'));
    } catch (error) {
      return fail('not-found', (error as Error).message);
    }
    try {
      const record = await store.get(name);
      return record ? c.json(record) : fail('not-found', `no operation named ${JSON.stringify(name)}`);
    } catch (error) {
      logger.error('read failed', { operation: name, error });
      return fail('not-recorded', 'store unavailable; retry later');
    }
  });

  app.notFound(() => fail('not-found', 'no such route'));
  app.onError((error) => {
    logger.error('unhandled error', { error });
    return fail('internal', 'internal error');
  });
  return app;
}
