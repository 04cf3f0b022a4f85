/**
 * The HTTP API's shapes, as zod schemas: the requests the routes validate
 * with, and the answers they give. The OpenAPI description (openapi.ts) is
 * generated from these, so what the routes take and what the description says
 * cannot drift; the answers are held to the same schemas by the e2e suite
 * (every JSON answer it receives is validated against the description), and
 * to the TypeScript types by the checks at the end of this file.
 */
import * as z from 'zod/mini';
import type { OperationChange } from '../../core/change.ts';
import { CREDENTIAL_LABEL } from '../../core/credentials.ts';
import { FAILURES } from '../../core/failures.ts';
import { OPERATION_KINDS, OPERATION_STATES, PROVIDERS } from '../../core/lifecycle.ts';
import type { OperationRecord, OperationResult as OperationResultType } from '../../core/reducer.ts';
import type { HistoryEntry, PollingStatus as PollingStatusType } from '../../core/views.ts';
import type { DeadLetter } from '../effects/dead-letters.ts';
import type { Transition } from '../effects/transition.ts';
import { type Decision, EFFECTS_FILTERS, UNPROCESSABLE_REASONS, type UnprocessableDelivery } from '../ports.ts';

/** The reducer's reasons for a discard (core/reducer.ts `DiscardReason`). */
export const DISCARD_REASONS = [
  'duplicate',
  'regress-from-terminal',
  'lower-rank',
  'stale-or-equal-update-time',
  'terminal-conflict',
] as const;

const State = z.enum(OPERATION_STATES);
const Kind = z.enum(OPERATION_KINDS);
const Provider = z.enum(PROVIDERS);
const Source = z.enum(['webhook', 'poll', 'track', 'overdue']);
/** An RFC 3339 time (UTC, `Z`), as every time in the API. */
const Time = z.string().check(z.minLength(20));
const Metadata = z.record(z.string(), z.unknown());
/** A count that fits a JSON number, or its text past 2^53. */
const Count = z.union([z.number(), z.string()]);
const Cursor = z.string().check(z.minLength(1), z.maxLength(2_048));
const PageLimit = z.coerce.number().check(z.int(), z.minimum(1), z.maximum(100));
/** The longest a long poll waits, in seconds (the per-operation one and the change feed's). */
export const MAX_WAIT_SECONDS = 60;
/** The most changes one page of the feed holds. */
export const FEED_MAX_LIMIT = 1_000;

// ---- requests ----

/**
 * `metadata`: the application's own labels for the job (as Gemini's `user_metadata`), carried on its record and its
 * effects; `credential`: the label of the Gemini API key that created it (GEMINI_API_KEYS), which polls it.
 */
export const TrackRequest = z.object({
  name: z.string(),
  metadata: z.optional(Metadata),
  credential: z.optional(z.string().check(z.regex(CREDENTIAL_LABEL))),
});

export const ListQuery = z.object({
  state: z.optional(State),
  kind: z.optional(Kind),
  provider: z.optional(Provider),
  effects: z.optional(z.enum(EFFECTS_FILTERS)),
  overdue: z.optional(z.enum(['true', 'false'])),
  limit: z.optional(PageLimit),
  cursor: z.optional(Cursor),
});

export const DecisionsQuery = z.object({
  outcome: z.optional(z.literal('unprocessable')),
  limit: z.optional(PageLimit),
  cursor: z.optional(Cursor),
});

/** The change feed's parameters (app/http/routes/changes.ts checks each by its own schema, to name the field it refuses). */
export const FeedQuery = z.object({
  after: z.optional(Cursor),
  wait: z.optional(z.coerce.number().check(z.minimum(0), z.maximum(MAX_WAIT_SECONDS))),
  name: z.optional(z.string()),
  kind: z.optional(Kind),
  provider: z.optional(Provider),
  state: z.optional(State),
  limit: z.optional(z.coerce.number().check(z.int(), z.minimum(1), z.maximum(FEED_MAX_LIMIT))),
});

/** The per-operation long poll's parameters (`GET /operations/{name}?afterVersion=&wait=`). */
export const LongPollQuery = z.object({
  afterVersion: z.optional(z.coerce.number().check(z.int(), z.minimum(0))),
  wait: FeedQuery.shape.wait,
});

export const RedriveRequest = z.object({ name: z.optional(z.string()), skip: z.optional(z.string()) });

// ---- answers ----

export const ErrorBody = z.object({
  error: z.enum(Object.keys(FAILURES) as [keyof typeof FAILURES, ...(keyof typeof FAILURES)[]]),
  message: z.string(),
  /** The parameter a 400 refuses: every route that takes query parameters names it (the lists, the long poll, the change feed). */
  field: z.optional(
    z.string().register(z.globalRegistry, {
      description: 'The parameter a 400 refuses (a query parameter, or `Last-Event-ID`): every route that takes parameters names it.',
    }),
  ),
  /** A 410's oldest cursor still good. */
  oldestCursor: z.optional(z.string()),
});

/** API Gateway's own answer in AWS (a refused signature, its throttle, a failed function): a message, no code. */
export const GatewayError = z.object({ message: z.string() });

const ErrorDetail = z.strictObject({
  code: z.optional(z.union([z.string(), z.number()])),
  message: z.optional(z.string()),
  status: z.optional(z.string()),
});

export const OperationResult = z.strictObject({
  outputUri: z.optional(z.string()),
  error: z.optional(ErrorDetail),
  filtered: z.optional(z.strictObject({ count: z.number(), reasons: z.array(z.string()) })),
  batchStats: z.optional(
    z.strictObject({
      requestCount: z.optional(Count),
      successfulRequestCount: z.optional(Count),
      failedRequestCount: z.optional(Count),
      pendingRequestCount: z.optional(Count),
    }),
  ),
  /** A File Search import or upload: the operation's `response`, as Gemini answered it. */
  response: z.optional(z.record(z.string(), z.unknown())),
  /** An Agent Platform tuning job that succeeded: the tuned model and its endpoint. */
  tunedModel: z.optional(z.strictObject({ model: z.optional(z.string()), endpoint: z.optional(z.string()) })),
  requestCounts: z.optional(
    z.strictObject({
      total: z.optional(Count),
      succeeded: z.optional(Count),
      failed: z.optional(Count),
      canceled: z.optional(Count),
      expired: z.optional(Count),
    }),
  ),
  outputFileId: z.optional(z.string()),
  errorFileId: z.optional(z.string()),
  fineTunedModel: z.optional(z.string()),
  usage: z.optional(
    z.strictObject({
      inputTokens: z.optional(Count),
      outputTokens: z.optional(Count),
      totalTokens: z.optional(Count),
      cachedTokens: z.optional(Count),
      thoughtTokens: z.optional(Count),
      toolUseTokens: z.optional(Count),
    }),
  ),
});

const Overdue = z.strictObject({ at: Time, afterSeconds: z.number() });

const recordFields = {
  name: z.string(),
  kind: Kind,
  provider: Provider,
  state: z.nullable(State),
  providerState: z.nullable(z.string()),
  updateTime: z.nullable(z.string()),
  version: z.number().check(z.int(), z.minimum(0)),
  previousState: z.nullable(State),
  stateChanged: z.boolean(),
  source: Source,
  eventId: z.nullable(z.string()),
  result: z.nullable(OperationResult),
  userMetadata: z.optional(z.nullable(Metadata)),
  credential: z.optional(z.string()),
  overdue: z.optional(Overdue),
  resultPending: z.optional(z.literal(true)),
  resultWrite: z.optional(z.literal(true)),
  createdAt: Time,
  recordedAt: Time,
};

/** The stored record of an operation. */
export const Operation = z.strictObject(recordFields);

export const PollingStatus = z.strictObject({
  nextPollAt: z.nullable(Time),
  failedPolls: z.number().check(z.int()),
  notFoundPolls: z.number().check(z.int()),
  note: z.nullable(z.string()),
});

/** The record with reconcile's polling status (absent in AWS, where the API reads the bare record). */
export const OperationView = z.strictObject({ ...recordFields, polling: z.optional(PollingStatus) });

export const OperationList = z.strictObject({ operations: z.array(OperationView), nextCursor: z.optional(z.string()) });

export const HistoryEntrySchema = z.strictObject({
  version: recordFields.version,
  state: recordFields.state,
  previousState: recordFields.previousState,
  stateChanged: recordFields.stateChanged,
  source: recordFields.source,
  eventId: recordFields.eventId,
  updateTime: recordFields.updateTime,
  recordedAt: recordFields.recordedAt,
});
export const History = z.strictObject({ name: z.string(), history: z.array(HistoryEntrySchema) });

export const DecisionSchema = z.strictObject({
  at: Time,
  source: Source,
  eventId: z.nullable(z.string()),
  state: z.nullable(State),
  updateTime: z.nullable(z.string()),
  verdict: z.enum(['applied', 'discarded', 'verifying-by-poll']),
  version: z.optional(z.number()),
  reason: z.optional(z.enum(DISCARD_REASONS)),
  scheme: z.optional(z.string()),
});
export const Decisions = z.strictObject({ name: z.string(), decisions: z.array(DecisionSchema) });

export const Unprocessable = z.strictObject({
  outcome: z.literal('unprocessable'),
  receivedAt: Time,
  webhookId: z.string(),
  type: z.nullable(z.string()),
  reason: z.enum(UNPROCESSABLE_REASONS),
  detail: z.string(),
  scheme: z.string(),
  body: z.string(),
});
export const UnprocessableList = z.strictObject({ decisions: z.array(Unprocessable), nextCursor: z.optional(z.string()) });

export const Change = z.strictObject({
  cursor: z.string(),
  name: z.string(),
  kind: Kind,
  provider: Provider,
  version: recordFields.version,
  state: recordFields.state,
  previousState: recordFields.previousState,
  stateChanged: z.boolean(),
  writeKind: z.enum(['track', 'state-change', 'refresh', 'result', 'overdue']),
  providerState: z.nullable(z.string()),
  updateTime: z.nullable(z.string()),
  result: z.nullable(OperationResult),
  userMetadata: z.optional(Metadata),
  overdue: z.optional(Overdue),
  source: Source,
  createdAt: Time,
  recordedAt: Time,
  committedAt: Time,
});
export const ChangesPage = z.strictObject({ changes: z.array(Change), cursor: z.string() });

/** Every authentic delivery is answered 200 with this, whatever it holds (guarantee 6). */
export const WebhookAnswer = z.strictObject({
  applied: z.boolean(),
  reason: z.optional(z.enum([...DISCARD_REASONS, 'unknown-event-type', 'unprocessable', 'verifying-by-poll'])),
  operation: z.optional(Operation),
  detail: z.optional(z.string()),
});

export const Health = z.union([
  z.strictObject({
    status: z.literal('ok'),
    geminiKeys: z.optional(
      z.strictObject({
        refused: z.array(z.strictObject({ label: z.optional(z.string()), status: z.number(), at: Time })),
      }),
    ),
    /** Every other provider's refused keys, by provider (`openai`, `anthropic`…). */
    providerKeys: z.optional(
      z.partialRecord(
        Provider,
        z.strictObject({ refused: z.array(z.strictObject({ label: z.optional(z.string()), status: z.number(), at: Time })) }),
      ),
    ),
  }),
  z.strictObject({ status: z.literal('degraded'), store: z.literal('unavailable'), reason: z.string() }),
]);

const TransitionSchema = z.strictObject({
  name: z.string(),
  kind: Kind,
  provider: Provider,
  state: recordFields.state,
  previousState: recordFields.previousState,
  version: recordFields.version,
  updateTime: recordFields.updateTime,
  providerState: recordFields.providerState,
  result: recordFields.result,
  userMetadata: recordFields.userMetadata,
  overdue: z.optional(z.strictObject({ at: Time, afterSeconds: z.number(), openSince: Time })),
  resultWrite: z.optional(z.literal(true)),
  recordedAt: Time,
});

export const DeadLetterSchema = z.strictObject({
  name: z.string(),
  version: z.number(),
  idempotencyKey: z.string(),
  reason: z.enum(['retries-exhausted', 'gone', 'waiting-behind']),
  transition: TransitionSchema,
  body: z.string(),
  record: z.optional(z.string()),
  lastError: z.string(),
  attempts: z.number(),
  firstAttemptAt: Time,
  deadLetteredAt: Time,
  status: z.enum(['dead', 'redriving']),
});
export const DeadLetterList = z.strictObject({
  deadLetters: z.array(DeadLetterSchema),
  undecodable: z.array(z.strictObject({ sequence: z.string(), name: z.nullable(z.string()), reason: z.string(), raw: z.string() })),
});
export const RedriveAnswer = z.strictObject({ redriven: z.array(z.string()), skipped: z.array(z.string()) });

export const LoginLink = z.strictObject({ link: z.string(), expiresInSeconds: z.number() });

// ---- the answers' schemas say what the types say (a drift is a type error here) ----

/** Each assignable to the other, with the same keys (an optional field one lacks is still a difference). */
type Same<A, B> = [A] extends [B]
  ? [B] extends [A]
    ? [keyof A] extends [keyof B]
      ? [keyof B] extends [keyof A]
        ? true
        : false
      : false
    : false
  : false;
const same = <A, B>(check: Same<A, B>) => check;
same<z.output<typeof Operation>, OperationRecord>(true);
same<NonNullable<z.output<typeof OperationResult>>, OperationResultType>(true);
same<NonNullable<z.output<typeof OperationResult>['error']>, NonNullable<OperationResultType['error']>>(true);
same<z.output<typeof PollingStatus>, PollingStatusType>(true);
same<z.output<typeof TransitionSchema>, Transition>(true);
same<z.output<typeof OperationView>, OperationRecord & { polling?: PollingStatusType }>(true);
same<z.output<typeof HistoryEntrySchema>, HistoryEntry>(true);
same<z.output<typeof DecisionSchema>, Decision>(true);
same<z.output<typeof Unprocessable>, UnprocessableDelivery>(true);
same<z.output<typeof Change>, OperationChange>(true);
same<z.output<typeof DeadLetterSchema>, DeadLetter>(true);
