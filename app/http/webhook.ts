/**
 * `POST /webhooks/gemini` as a use case, apart from any HTTP framework:
 * verify the signature over the raw body, map the delivery, ingest the event,
 * and answer with a status and a JSON body, which the Hono app (app/http/routes/gemini-webhook.ts)
 * sends. (Served straight from the API Gateway event, without Hono, it made no
 * measurable difference to the API Lambda's cold start on Node 24, which
 * loads undici at startup anyway: so it goes through the app like every route.)
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { FAILURES, type Failure, failureBody, RETRY_AFTER_SECONDS } from '../../core/failures.ts';
import type { OperationKind } from '../../core/lifecycle.ts';
import { InvalidNameError } from '../../core/names.ts';
import { parseProviderJson } from '../../core/provider-values.ts';
import type { OperationEvent } from '../../core/reducer.ts';
import { InvalidTimeError, timeFromDate } from '../../core/time.ts';
import { mapWebhookDelivery } from '../../providers/gemini/webhook.ts';
import { MalformedEventError, type WebhookMapping } from '../../providers/port.ts';
import { type IngestDeps, ingest, NotRecordedError, RecentRecords } from '../ingest.ts';
import {
  type DecisionLog,
  type DeliveryReceipts,
  type OperationStore,
  StoreRejectedError,
  type UnprocessableLog,
  type UnprocessableReason,
} from '../ports.ts';
import type { StepSpan, Telemetry, WebhookDecision, WebhookOutcome } from '../telemetry.ts';
import { TokenBucket } from './token-bucket.ts';
import { type HeaderReader, NotConfiguredError, type WebhookSignatureVerifier } from './webhook-signature.ts';

export const MAX_WEBHOOK_BODY_BYTES = 256 * 1024;
/** How much of an unprocessable delivery's body is kept for the operator. */
export const UNPROCESSABLE_BODY_BYTES = 4 * 1024;

export interface WebhookAnswer {
  status: (typeof FAILURES)[Failure] | 200;
  body: unknown;
  /** `Retry-After` (seconds) of a 429 or a 503. */
  retryAfterSeconds?: number;
  /** What became of the delivery, as `ratchet_webhook_deliveries_total` counts it. */
  outcome: WebhookOutcome;
}

/**
 * A provider's deliveries read into an event (Gemini's by default): `ignored` for a type it does not follow. Throws
 * SyntaxError, InvalidTimeError, InvalidNameError or MalformedEventError for what can never be used.
 */
export type DeliveryMapper = (body: unknown, deliveryId: string) => WebhookMapping | Promise<WebhookMapping>;

export interface WebhookDeps {
  store: OperationStore;
  verifier: WebhookSignatureVerifier;
  /** How this route's provider's deliveries read (default: Gemini's, providers/gemini/webhook.ts). */
  map?: DeliveryMapper;
  logger: Logger;
  /** Counts each delivery by decision and times it (`ratchet_webhook_deliveries_total`, `…_duration_seconds`); traces it where OpenTelemetry is on. */
  telemetry?: Telemetry;
  clock?: () => Date;
  ingest?: Omit<IngestDeps, 'store' | 'clock'>;
  /** Notes verified deliveries that name no operation (Gemini's ping), for `npm run connect`. */
  receipts?: DeliveryReceipts;
  /**
   * The embedded engine's decisions: a JWT-signed delivery's `verifying-by-poll` is noted there, and the app serves
   * `GET /operations/{name}/decisions` from it (without it that route is 400; in AWS decisions are log lines).
   */
  decisions?: DecisionLog;
  /**
   * Where authentic deliveries that can never be used are kept (answered 200, listed by
   * `GET /decisions?outcome=unprocessable`). Without it they are answered 200 and logged only.
   */
  unprocessable?: UnprocessableLog;
  /**
   * Dynamic-webhook deliveries signed with a JWT (which does not cover the
   * body) are never applied from their body: the operation they name is polled
   * instead. Without this they are answered 503 (nothing here can poll).
   */
  pollNow?: (operation: { name: string; kind: OperationKind }) => Promise<'scheduled' | 'terminal'>;
  /** Starts a reconcile run soon, for a job this delivery ended that is due already (without it: at its schedule). */
  wakeReconcile?: () => Promise<void>;
  /**
   * How many polls JWT-only deliveries may ask for a minute (their burst too),
   * all of them together: each costs a call to Gemini with the operator's key,
   * like a track. Default 600, as TRACK_RATE_PER_MINUTE's.
   */
  jwtPollsPerMinute?: number;
}

const ok = (body: unknown, decision: WebhookDecision, reason = ''): WebhookAnswer => ({ status: 200, body, outcome: { decision, reason } });
/** What a refusal counts as: its decision, with the failure's code as the reason. */
const REFUSED: Partial<Record<Failure, WebhookDecision>> = {
  'invalid-signature': 'unauthenticated',
  'rate-limited': 'rate-limited',
  'not-configured': 'not-configured',
  'keys-unavailable': 'not-configured',
};
/** A refusal; a 503 (nothing recorded: the store away, no secret yet) says when to try again, as every 503 of Ratchet's does. */
const fail = (failure: Failure, message: string): WebhookAnswer => ({
  status: FAILURES[failure],
  body: failureBody(failure, message),
  ...(FAILURES[failure] === 503 && { retryAfterSeconds: RETRY_AFTER_SECONDS }),
  outcome: { decision: REFUSED[failure] ?? 'not-recorded', reason: failure },
});

/**
 * Why a signature may have failed on a delivery that was signed right: the
 * body arrived with another length than the sender's Content-Length, so
 * something in front of Ratchet (a body parser such as `express.json()`, in an
 * app that mounts it) read or re-serialized it. Empty when the lengths agree.
 */
function changedInFront(raw: string, headers: HeaderReader): string {
  const declared = Number(headers.get('content-length') ?? Number.NaN);
  const received = Buffer.byteLength(raw);
  if (!Number.isInteger(declared) || declared === received) return '';
  return (
    `; the body arrived as ${received} bytes where Content-Length said ${declared}: something in front of Ratchet ` +
    '(a body parser such as express.json()) read or changed it; mount Ratchet before any body parser'
  );
}

/** A receiver of Gemini deliveries: one per process, which keeps the records it lately wrote (write hints). */
export function receiveWebhook(deps: WebhookDeps): (raw: string, headers: HeaderReader) => Promise<WebhookAnswer> {
  const { telemetry } = deps;
  const judge = judgeWebhook(deps);
  if (!telemetry) return judge;
  return async (raw, headers) => {
    const started = performance.now();
    const span = telemetry.span?.('ratchet.webhook', {});
    try {
      const answer = await judge(raw, headers, span);
      telemetry.webhook(answer.outcome, (performance.now() - started) / 1000);
      span?.set({
        'ratchet.decision': answer.outcome.decision,
        'ratchet.reason': answer.outcome.reason,
        'http.response.status_code': answer.status,
      });
      span?.end();
      return answer;
    } catch (error) {
      telemetry.webhook({ decision: 'failed', reason: '' }, (performance.now() - started) / 1000);
      span?.end(error);
      throw error;
    }
  };
}

/** The receiver itself: the delivery's answer and what became of it; `span`, where one traces it, gets the operation's attributes and its write's span. */
function judgeWebhook(deps: WebhookDeps): (raw: string, headers: HeaderReader, span?: StepSpan) => Promise<WebhookAnswer> {
  const { store, verifier, logger, telemetry, map = mapWebhookDelivery } = deps;
  const clock = deps.clock ?? (() => new Date());
  // Per process (a Lambda instance): which write variant an operation's next event likely needs.
  const hints = new RecentRecords();
  const jwtReplays = new JwtReplays(() => clock().getTime());
  const jwtPollsPerMinute = deps.jwtPollsPerMinute ?? 600;
  const jwtPolls = new TokenBucket(jwtPollsPerMinute, 60_000, () => clock().getTime());

  return async (raw, headers, span) => {
    let verification: Awaited<ReturnType<WebhookSignatureVerifier['verify']>>;
    try {
      verification = await verifier.verify(raw, headers);
    } catch (error) {
      if (!(error instanceof NotConfiguredError)) throw error;
      return fail('not-configured', `${error.message}; retry later`);
    }
    if (!verification.ok && verification.status === 'keys-unavailable') {
      logger.error('webhook not judged: signing keys unavailable', { reason: verification.reason });
      return fail('keys-unavailable', verification.reason);
    }
    if (!verification.ok) {
      const reason = verification.reason + changedInFront(raw, headers);
      logger.warn('webhook rejected', { decision: 'rejected', reason });
      return fail('invalid-signature', reason);
    }
    const deliveryId = verification.id;
    // From here the delivery is authentic: whatever it holds, it is answered 2xx (guarantee 6), or 503 while the store is down.
    const unusable = (reason: UnprocessableReason, detail: string) =>
      unprocessable({ reason, detail, raw, webhookId: deliveryId, scheme: verification.scheme });
    let mapping: WebhookMapping;
    try {
      mapping = await map(parseProviderJson(raw), deliveryId);
    } catch (error) {
      const reason = unprocessableReasonOf(error);
      if (!reason) throw error;
      return unusable(reason, error instanceof SyntaxError ? `body is not JSON: ${error.message}` : (error as Error).message);
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
      return ok({ applied: false, reason: 'unknown-event-type' }, 'ignored', 'unknown-event-type');
    }
    const { event } = mapping;
    span?.set({ 'ratchet.operation.name': event.name, 'ratchet.operation.kind': event.kind });
    if (verification.scheme === 'jwt') {
      // The token does not cover the body: it may ask a poll of one operation, for its lifetime, and no other.
      if (!jwtReplays.bind(verification.token, event.name)) {
        logger.warn('webhook rejected', { decision: 'rejected', reason: 'jwt-replayed', webhookId: deliveryId, operation: event.name });
        return fail('invalid-signature', 'this JWT was already used for a delivery about another operation');
      }
      const waitMs = jwtPolls.take('jwt');
      if (waitMs > 0) {
        logger.warn('webhook refused: too many polls asked by JWT-only deliveries', { webhookId: deliveryId, operation: event.name });
        return {
          ...fail('rate-limited', `JWT-only deliveries ask at most ${jwtPollsPerMinute} polls a minute; retry later`),
          retryAfterSeconds: Math.ceil(waitMs / 1000),
        };
      }
      return verifyByPoll(event, deliveryId, unusable);
    }
    const write = span && telemetry?.span?.('ratchet.write', { 'ratchet.operation.name': event.name }, span);
    try {
      const result = await ingest(
        { ...event, scheme: verification.scheme },
        { hints, ...deps.ingest, store, clock, ...(write && { traceparent: write.traceparent() }) },
      );
      const decided = { 'ratchet.operation.version': result.record.version, 'ratchet.decision': result.outcome };
      write?.set(decided);
      write?.end();
      span?.set(decided);
      const log = {
        decision: result.outcome,
        webhookId: deliveryId,
        operation: event.name,
        eventState: event.state,
        attempts: result.attempts,
      };
      if (result.outcome === 'applied') {
        // Ended without its outcome (OpenAI's deliveries name the job alone): the poll that brings it is asked for now,
        // not at the job's next poll (up to half an hour on). Best effort: the job is due all the same. A job this
        // delivery made is due already (from its first write): reconcile is only woken, no write spent on it.
        if (result.record.resultPending) {
          const asked = result.record.version > 1 ? deps.pollNow?.({ name: event.name, kind: event.kind }) : deps.wakeReconcile?.();
          await asked?.catch((error: Error) =>
            logger.warn('poll for the outcome not asked; the job is polled on its schedule', {
              operation: event.name,
              detail: error.message,
            }),
          );
        }
        logger.info('webhook applied', {
          ...log,
          state: result.record.state,
          version: result.record.version,
          stateChanged: result.stateChanged,
        });
        return ok({ applied: true, operation: result.record }, 'applied');
      }
      // A second terminal state for one operation is a provider anomaly: surface it, never apply it.
      const conflict = result.reason === 'terminal-conflict';
      const level = conflict ? 'warn' : 'info';
      logger[level]('webhook discarded', {
        ...log,
        reason: result.reason,
        storedState: result.record.state,
        version: result.record.version,
      });
      return ok({ applied: false, reason: result.reason, operation: result.record }, 'discarded', result.reason);
    } catch (error) {
      write?.end(error);
      if (error instanceof StoreRejectedError) return unusable('unstorable', error.message);
      if (!(error instanceof NotRecordedError)) throw error;
      logger.error('webhook not recorded', {
        decision: 'not-recorded',
        reason: error.reason,
        webhookId: deliveryId,
        operation: event.name,
        error: error.cause,
      });
      return fail('not-recorded', `event not recorded (${error.reason}); retry later`);
    }
  };

  /**
   * An authentic delivery no retry can make usable: 200, so Gemini neither retries it for a day nor switches the
   * webhook off; kept for the operator, logged and counted. Only a store that cannot keep it now answers 503.
   */
  async function unprocessable(delivery: {
    reason: UnprocessableReason;
    detail: string;
    raw: string;
    webhookId: string;
    scheme: string;
  }): Promise<WebhookAnswer> {
    const { reason, detail, raw, webhookId, scheme } = delivery;
    const type = envelopeTypeOf(raw);
    logger.error('webhook unprocessable: answered 200, kept in the decisions log', {
      decision: 'unprocessable',
      reason,
      type,
      webhookId,
      detail,
    });
    try {
      await deps.unprocessable?.recordUnprocessable({
        outcome: 'unprocessable',
        receivedAt: timeFromDate(clock()),
        webhookId,
        type,
        reason,
        detail: detail.slice(0, 1_000),
        scheme,
        body: Buffer.from(raw).subarray(0, UNPROCESSABLE_BODY_BYTES).toString('utf8'),
      });
    } catch (error) {
      logger.error('webhook not recorded', { decision: 'not-recorded', reason: 'unprocessable-not-kept', webhookId, error });
      return fail('not-recorded', 'the delivery could not be kept; retry later');
    }
    return ok({ applied: false, reason: 'unprocessable', detail }, 'unprocessable', reason);
  }

  /** The body named the operation, nothing more: what Gemini answers a poll is what gets recorded. */
  async function verifyByPoll(
    event: OperationEvent,
    deliveryId: string,
    unusable: (reason: UnprocessableReason, detail: string) => Promise<WebhookAnswer>,
  ): Promise<WebhookAnswer> {
    if (!deps.pollNow) {
      return fail('not-configured', 'a JWT-signed delivery is verified by polling Gemini, and polling is not configured here; retry later');
    }
    try {
      const at = timeFromDate(clock());
      const outcome = await deps.pollNow({ name: event.name, kind: event.kind });
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
      return ok({ applied: false, reason: 'verifying-by-poll' }, 'verifying-by-poll');
    } catch (error) {
      if (error instanceof StoreRejectedError) return unusable('unstorable', error.message);
      logger.error('webhook not recorded', { decision: 'not-recorded', reason: 'poll-request-failed', webhookId: deliveryId, error });
      return fail('not-recorded', 'could not ask for the poll; retry later');
    }
  }
}

/** Why a delivery's content can never be used, or undefined for an error that is not about the content. */
function unprocessableReasonOf(error: unknown): UnprocessableReason | undefined {
  if (error instanceof SyntaxError) return 'not-json';
  if (error instanceof InvalidTimeError) return 'invalid-time';
  if (error instanceof InvalidNameError) return 'invalid-name';
  if (error instanceof MalformedEventError) return 'malformed-event';
  return undefined;
}

/** The envelope's `type`, when the body is JSON with one (for the decisions log). */
function envelopeTypeOf(raw: string): string | null {
  try {
    const type = (JSON.parse(raw) as { type?: unknown } | null)?.type;
    return typeof type === 'string' ? type.slice(0, 100) : null;
  } catch {
    return null;
  }
}

/**
 * Which operation each JWT (by digest) asked about, for as long as the token
 * is valid: a retry of the same delivery passes, the same token over another
 * body (another name) does not. Only Google's keys make such tokens, so the
 * map holds what Gemini sent in the last minutes; expired ones are dropped as
 * it grows.
 */
class JwtReplays {
  private readonly named = new Map<string, { name: string; expiresAt: number }>();

  constructor(private readonly now: () => number) {}

  bind(token: { digest: string; expiresAt: number }, name: string): boolean {
    const now = this.now();
    const seen = this.named.get(token.digest);
    if (seen && seen.expiresAt > now) return seen.name === name;
    if (this.named.size >= 10_000) for (const [digest, entry] of this.named) if (entry.expiresAt <= now) this.named.delete(digest);
    this.named.set(token.digest, { name, expiresAt: token.expiresAt });
    return true;
  }
}
