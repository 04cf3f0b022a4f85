/**
 * The words a route's description is written in (app/http/routes/*.ts declare
 * each route's OpenAPI operation with them; app/http/openapi.ts joins them
 * into the document): the answers' schemas by name, the error answers grouped
 * by status, a query's parameters from the schema the route parses it with.
 */
import * as z from 'zod/mini';
import { FAILURES, type Failure, RETRY_AFTER_SECONDS } from '../../core/failures.ts';
import * as api from './api-schemas.ts';

type Json = Record<string, unknown>;

/** The answers' schemas, by the name the description gives them (`#/components/schemas/<name>`). */
export const COMPONENTS = {
  Error: api.ErrorBody,
  Operation: api.Operation,
  OperationResult: api.OperationResult,
  PollingStatus: api.PollingStatus,
  OperationView: api.OperationView,
  OperationList: api.OperationList,
  HistoryEntry: api.HistoryEntrySchema,
  History: api.History,
  Decision: api.DecisionSchema,
  Decisions: api.Decisions,
  Unprocessable: api.Unprocessable,
  UnprocessableList: api.UnprocessableList,
  Change: api.Change,
  ChangesPage: api.ChangesPage,
  WebhookAnswer: api.WebhookAnswer,
  Health: api.Health,
  DeadLetter: api.DeadLetterSchema,
  DeadLetterList: api.DeadLetterList,
  RedriveAnswer: api.RedriveAnswer,
  LoginLink: api.LoginLink,
  TrackRequest: api.TrackRequest,
  RedriveRequest: api.RedriveRequest,
  GatewayError: api.GatewayError,
} as const;
type Component = keyof typeof COMPONENTS;

export const ref = (name: Component) => ({ $ref: `#/components/schemas/${name}` });
export const json = (name: Component) => ({ 'application/json': { schema: ref(name) } });
export const retryAfter = {
  'Retry-After': { description: `Seconds to wait before trying again (${RETRY_AFTER_SECONDS} for a 503).`, schema: { type: 'integer' } },
};

/** What the routes only the local runtime serves say of it. */
export const LOCAL = 'Local runtime only (one machine, PostgreSQL, inside an app): not in AWS.';

/** What API Gateway answers itself in AWS (a refused signature, its throttle, a function that failed or timed out). */
const GATEWAY: Record<number, string> = {
  403: "in AWS, API Gateway's own refusal of a missing or bad SigV4 signature",
  429: "in AWS, API Gateway's throttle",
  502: 'in AWS, the function failed',
  504: 'in AWS, the function timed out',
};

/** An Error whose `error` is one of `codes`. */
export const errorOf = (codes: Failure[]) => ({ allOf: [ref('Error'), { properties: { error: { enum: codes } } }] });

/**
 * The error answers of a route, grouped by status: each status's body is an Error whose `error` is one of its codes;
 * where API Gateway answers that status itself in AWS, its `{"message"}` too.
 */
export function errors(...failures: Failure[]): Json {
  const byStatus = new Map<number, Failure[]>();
  // A failure named twice (a route's own and IN_APP's) is one code.
  for (const failure of new Set(failures)) byStatus.set(FAILURES[failure], [...(byStatus.get(FAILURES[failure]) ?? []), failure]);
  return Object.fromEntries(
    [...byStatus].map(([status, codes]) => {
      const error = errorOf(codes);
      const gateway = GATEWAY[status];
      return [
        String(status),
        {
          description: `\`error\` ${codes.map((code) => `\`${code}\``).join(' or ')}${gateway ? `; or, ${gateway}` : ''}`,
          ...((status === 503 || status === 429) && { headers: retryAfter }),
          content: { 'application/json': { schema: gateway ? { anyOf: [error, ref('GatewayError')] } : error } },
        },
      ];
    }),
  );
}

/** The error answers of a route AWS serves too, with API Gateway's own 502 and 504. */
export function awsErrors(...failures: Failure[]): Json {
  const gateway = [502, 504].map((status) => [String(status), { description: GATEWAY[status], content: json('GatewayError') }]);
  return { ...errors(...failures), ...Object.fromEntries(gateway) };
}

/** What every route answers inside an app (createRatchet's fetch) before any route: the store away, or after close(). */
export const IN_APP: Failure[] = ['not-recorded', 'closed'];

/** What every route behind a credential may also answer (the local runtime's access guard, the store away). */
export const GUARDED: Failure[] = ['unauthorized', 'foreign-origin', 'misdirected-request', 'overloaded', 'internal', ...IN_APP];

/** A query's parameters, from the schema the route parses it with. */
export function queryParameters(schema: z.ZodMiniObject, descriptions: Record<string, string>): Json[] {
  const { properties } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as { properties: Record<string, Json> };
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: 'query',
    required: false,
    description: descriptions[name] ?? name,
    schema: property,
  }));
}
