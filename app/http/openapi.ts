/**
 * The OpenAPI 3.1 description of every route a client uses, generated from
 * the schemas the routes validate with (api-schemas.ts): served as
 * `GET /openapi.json` by every home, and committed as docs/openapi.json
 * (`npm run openapi` writes it; a test compares the two). Pure.
 */
import * as z from 'zod/mini';
import { FAILURES, type Failure, RETRY_AFTER_SECONDS } from '../../core/failures.ts';
import * as api from './api-schemas.ts';

type Json = Record<string, unknown>;

/** The answers' schemas, by the name the description gives them (`#/components/schemas/<name>`). */
const COMPONENTS = {
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

function componentSchemas(): Json {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of Object.entries(COMPONENTS)) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, { target: 'draft-2020-12', uri: (id) => `#/components/schemas/${id}` }) as {
    schemas: Record<string, Json>;
  };
  for (const schema of Object.values(schemas)) {
    delete schema.$schema;
    delete schema.$id;
  }
  return schemas;
}

const ref = (name: Component) => ({ $ref: `#/components/schemas/${name}` });
const json = (name: Component) => ({ 'application/json': { schema: ref(name) } });
const retryAfter = {
  'Retry-After': { description: `Seconds to wait before trying again (${RETRY_AFTER_SECONDS} for a 503).`, schema: { type: 'integer' } },
};

/** What API Gateway answers itself in AWS (a refused signature, its throttle, a function that failed or timed out). */
const GATEWAY: Record<number, string> = {
  403: "in AWS, API Gateway's own refusal of a missing or bad SigV4 signature",
  429: "in AWS, API Gateway's throttle",
  502: 'in AWS, the function failed',
  504: 'in AWS, the function timed out',
};

/** An Error whose `error` is one of `codes`. */
const errorOf = (codes: Failure[]) => ({ allOf: [ref('Error'), { properties: { error: { enum: codes } } }] });

/**
 * The error answers of a route, grouped by status: each status's body is an Error whose `error` is one of its codes;
 * where API Gateway answers that status itself in AWS, its `{"message"}` too.
 */
function errors(...failures: Failure[]): Json {
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
function awsErrors(...failures: Failure[]): Json {
  const gateway = [502, 504].map((status) => [String(status), { description: GATEWAY[status], content: json('GatewayError') }]);
  return { ...errors(...failures), ...Object.fromEntries(gateway) };
}

/** What every route answers inside an app (createRatchet's fetch) before any route: the store away, or after close(). */
const IN_APP: Failure[] = ['not-recorded', 'closed'];

/** What every route behind a credential may also answer (the local runtime's access guard, the store away). */
const GUARDED: Failure[] = ['unauthorized', 'foreign-origin', 'misdirected-request', 'overloaded', 'internal', ...IN_APP];

/** A query's parameters, from the schema the route parses it with. */
function queryParameters(schema: z.ZodMiniObject, descriptions: Record<string, string>): Json[] {
  const { properties } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as { properties: Record<string, Json> };
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: 'query',
    required: false,
    description: descriptions[name] ?? name,
    schema: property,
  }));
}

const NAME_PARAMETER = {
  name: 'name',
  in: 'path',
  required: true,
  description:
    "The operation's resource name, such as `batches/123`, `models/veo-3.0-generate-preview/operations/abc` or `interactions/xyz`. It contains `/`: send it raw or percent-encoded (`%2F`); either is read.",
  schema: { type: 'string' },
};

/** The headers every delivery carries, whatever signs it. */
const WEBHOOK_HEADERS = {
  'webhook-id': "Standard Webhooks' `webhook-id`: the delivery's id, the same on each of its retries.",
  'webhook-timestamp': "Standard Webhooks' `webhook-timestamp`: unix seconds, within 300 s of now.",
  'webhook-signature':
    "Space-separated signatures: `v1,<base64>` (HMAC-SHA256, a static webhook), `v1a,<base64>` (Ed25519, a dynamic webhook), or a dynamic webhook's JWT (`xxx.yyy.zzz`, RS256), which signs the delivery but not its body.",
};

const FEED_FILTERS = {
  after: 'A cursor this feed returned: the changes committed after it. Without it, the feed head (changes from now on).',
  name: 'Only this operation.',
  kind: 'Only this kind.',
  state: 'Only changes that wrote this state.',
};

function paths(): Json {
  const feedQuery = (fields: (keyof typeof api.FeedQuery.shape)[]) =>
    queryParameters(z.object(Object.fromEntries(fields.map((field) => [field, api.FeedQuery.shape[field]]))), {
      ...FEED_FILTERS,
      wait: 'Seconds to wait for a change when there is none yet (0-60, fractions allowed).',
      limit: 'At most this many changes (1-1,000).',
    });
  const local = 'Local runtime only (one machine, PostgreSQL, inside an app): not in AWS.';
  return {
    '/webhooks/gemini': {
      post: {
        operationId: 'receiveWebhook',
        tags: ['webhook'],
        summary: "Gemini's webhook deliveries",
        description:
          'A delivery signed by Standard Webhooks (HMAC or Ed25519) or by a dynamic webhook JWT. Every authentic delivery is answered 200, whatever it holds: applied, discarded with the reason, or unprocessable (kept under `GET /decisions`). Its signature is its credential.',
        security: [],
        // Every scheme, a dynamic webhook's JWT included, needs all three: a delivery without one is a 401.
        parameters: Object.entries(WEBHOOK_HEADERS).map(([name, description]) => ({
          name,
          in: 'header',
          required: true,
          description,
          schema: { type: 'string' },
        })),
        requestBody: {
          required: true,
          description: "Gemini's event envelope, exactly as signed (at most 256 KiB).",
          content: { 'application/json': { schema: { type: 'object' } } },
        },
        responses: {
          200: { description: 'An authentic delivery, applied or not.', content: json('WebhookAnswer') },
          ...awsErrors(
            'invalid-signature',
            'payload-too-large',
            'rate-limited',
            'not-recorded',
            'not-configured',
            'keys-unavailable',
            'overloaded',
            'internal',
            ...IN_APP,
          ),
        },
      },
    },
    '/operations': {
      post: {
        operationId: 'track',
        tags: ['operations'],
        summary: 'Track an operation before any webhook',
        requestBody: { required: true, content: json('TrackRequest') },
        responses: {
          201: { description: 'Newly tracked: its record, `state` null.', content: json('Operation') },
          200: { description: 'Already known: the stored record.', content: json('Operation') },
          ...awsErrors('malformed-request', 'unstorable', 'payload-too-large', 'unsupported-media-type', 'rate-limited', ...GUARDED),
        },
      },
      get: {
        operationId: 'listOperations',
        tags: ['operations'],
        summary: 'Operations, most recently recorded first',
        parameters: queryParameters(api.ListQuery, {
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
      },
    },
    '/operations/{name}': {
      get: {
        operationId: 'getOperation',
        tags: ['operations'],
        summary: 'One operation, with its polling status; a long poll with `wait`',
        parameters: [
          NAME_PARAMETER,
          ...queryParameters(api.LongPollQuery, {
            afterVersion: `Answer once the version is past this one (default: the version it has now). ${local}`,
            wait: `Seconds to wait for that (0-60). ${local}`,
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
      },
    },
    '/operations/{name}/history': {
      get: {
        operationId: 'getHistory',
        tags: ['operations'],
        summary: 'Every applied write of an operation, in version order',
        parameters: [NAME_PARAMETER],
        responses: {
          200: { description: 'Its history.', content: json('History') },
          ...awsErrors('malformed-request', 'not-found', ...GUARDED),
        },
      },
    },
    '/operations/{name}/decisions': {
      get: {
        operationId: 'getDecisions',
        tags: ['operations'],
        summary: 'Every delivery, poll and track that named the operation, and its fate',
        description: local,
        parameters: [NAME_PARAMETER],
        responses: {
          200: { description: 'Oldest first.', content: json('Decisions') },
          ...errors('malformed-request', 'not-found', ...GUARDED),
        },
      },
    },
    '/decisions': {
      get: {
        operationId: 'listUnprocessable',
        tags: ['operations'],
        summary: 'Authentic deliveries that could never be used, newest first',
        parameters: queryParameters(api.DecisionsQuery, {
          outcome: '`unprocessable` (the only list kept).',
          limit: 'At most this many (1-100, default 50).',
          cursor: "The previous page's `nextCursor`.",
        }),
        responses: { 200: { description: 'A page.', content: json('UnprocessableList') }, ...awsErrors('malformed-request', ...GUARDED) },
      },
    },
    '/changes': {
      get: {
        operationId: 'changes',
        tags: ['change feed'],
        summary: 'The change feed: changes committed after a cursor, in commit order (a long poll)',
        description: `${local} Always go on from the \`cursor\` returned.`,
        parameters: feedQuery(['after', 'wait', 'name', 'kind', 'state', 'limit']),
        responses: {
          200: { description: 'The changes (none after `wait` seconds) and the cursor to go on from.', content: json('ChangesPage') },
          ...errors('malformed-request', 'cursor-expired', ...GUARDED),
        },
      },
    },
    '/changes/stream': {
      get: {
        operationId: 'changeStream',
        tags: ['change feed'],
        summary: 'The change feed as Server-Sent Events',
        description: `${local} Events: \`change\` (\`id\` the change's cursor, \`data\` a Change), \`dropped\` and \`expired\` (\`data\` an Error; the stream then ends: reconnect with the last id). A \`: keep-alive\` comment while idle.`,
        parameters: [
          ...feedQuery(['after', 'name', 'kind', 'state']),
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
      },
    },
    '/effects/dead-letters': {
      get: {
        operationId: 'listDeadLetters',
        tags: ['effects'],
        summary: 'Effects set aside after their retries, and records that could not be read',
        description: local,
        responses: {
          200: { description: 'Every dead letter.', content: json('DeadLetterList') },
          ...errors('not-found', ...GUARDED),
        },
      },
    },
    '/effects/redrive': {
      post: {
        operationId: 'redrive',
        tags: ['effects'],
        summary: 'Send dead letters again (or drop one with `skip`)',
        description: local,
        requestBody: { required: true, content: json('RedriveRequest') },
        responses: {
          200: { description: 'What was sent again and what was dropped, by `name#version`.', content: json('RedriveAnswer') },
          ...errors('malformed-request', 'unsupported-media-type', 'not-found', ...GUARDED),
        },
      },
    },
    '/login/link': {
      post: {
        operationId: 'loginLink',
        tags: ['health'],
        summary: 'A one-time sign-in link for the console (the API token only)',
        description: local,
        parameters: [
          { name: 'next', in: 'query', required: false, description: 'The console page to land on.', schema: { type: 'string' } },
        ],
        responses: { 200: { description: 'The link, good once.', content: json('LoginLink') }, ...errors(...GUARDED) },
      },
    },
    '/healthz': {
      get: {
        operationId: 'health',
        tags: ['health'],
        summary: 'Whether this instance and its store answer',
        security: [],
        responses: {
          200: { description: 'Serving (a Gemini key refused is named, by label).', content: json('Health') },
          503: {
            description:
              'The store does not answer (local runtime); inside an app, before its store was first reached or after `close()`, an Error.',
            headers: retryAfter,
            content: { 'application/json': { schema: { anyOf: [ref('Health'), errorOf(IN_APP)] } } },
          },
        },
      },
    },
    '/metrics': {
      get: {
        operationId: 'metrics',
        tags: ['health'],
        summary: 'Metrics in the Prometheus text format (scrape with the API token as a bearer token)',
        description: `${local} This instance's counters and histograms, and the database's gauges read at each scrape: the names in docs/operations.md.`,
        responses: {
          200: { description: 'The exposition, text format 0.0.4.', content: { 'text/plain': { schema: { type: 'string' } } } },
          ...errors(...GUARDED),
        },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'openApi',
        tags: ['health'],
        summary: 'This description',
        description: local,
        responses: {
          200: { description: 'OpenAPI 3.1.', content: { 'application/json': { schema: { type: 'object' } } } },
          ...errors(...GUARDED),
        },
      },
    },
  };
}

/** The description; `basePath` is where the app is mounted (inside an app), its one server. */
export function openApiDocument(basePath = ''): Json {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Ratchet',
      version: '0.1.0',
      summary: "Gemini long-running jobs' state, only ever forward",
      description:
        'Every route a client uses, on every home: one machine, PostgreSQL, inside an app (under its `basePath`), and AWS, where the `/operations` and `/decisions` routes take SigV4 and the routes marked local runtime only do not exist. The contract in words: docs/contract.md.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: basePath || '/', description: basePath ? 'where this Ratchet is mounted' : 'this Ratchet' }],
    security: [{ bearer: [] }, { sigv4: [] }],
    tags: [
      { name: 'webhook', description: "Gemini's deliveries in." },
      { name: 'operations', description: 'Tracked jobs: their records, histories and decisions.' },
      { name: 'change feed', description: 'Every applied write, in commit order.' },
      { name: 'effects', description: 'The effects admin: dead letters and redrive.' },
      { name: 'health', description: 'Health, sign-in and this description.' },
    ],
    paths: paths(),
    components: {
      schemas: componentSchemas(),
      securitySchemes: {
        bearer: { type: 'http', scheme: 'bearer', description: 'RATCHET_API_TOKEN (the local runtime, PostgreSQL, inside an app).' },
        sigv4: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description: 'AWS Signature Version 4 for execute-api (AWS): IAM decides.',
        },
      },
    },
  };
}

const served = new Map<string, string>();
/** The description as served under `basePath`, made once per path. */
export function openApiText(basePath = ''): string {
  let text = served.get(basePath);
  if (text === undefined) {
    text = `${JSON.stringify(openApiDocument(basePath), null, 2)}\n`;
    served.set(basePath, text);
  }
  return text;
}
