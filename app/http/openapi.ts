/**
 * The OpenAPI 3.1 description of every route a client uses, its paths from
 * the routes' own declarations (app/http/routes/*.ts) and its schemas from
 * those the routes validate with (api-schemas.ts): served as
 * `GET /openapi.json` by every home, and committed as docs/openapi.json
 * (`npm run openapi` writes it; a test compares the two). Pure.
 */
import * as z from 'zod/mini';
import { COMPONENTS, errors, GUARDED, json, LOCAL } from './describe.ts';
import { CHANGES_ROUTES } from './routes/changes.ts';
import type { Route } from './routes/common.ts';
import { UNPROCESSABLE } from './routes/decisions.ts';
import { EFFECTS_ADMIN_ROUTES } from './routes/effects-admin.ts';
import { GEMINI_WEBHOOK } from './routes/gemini-webhook.ts';
import { HEALTH } from './routes/health.ts';
import { METRICS } from './routes/metrics.ts';
import { OPERATIONS_ROUTES } from './routes/operations.ts';
import { AZURE_OPENAI_WEBHOOK, OPENAI_WEBHOOK } from './routes/provider-webhooks.ts';

type Json = Record<string, unknown>;

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

/** `GET /openapi.json` (served by routes/openapi.ts): declared here, beside what it serves. */
export const OPENAPI: Route = {
  method: 'get',
  path: '/openapi.json',
  doc: () => ({
    operationId: 'openApi',
    tags: ['health'],
    summary: 'This description',
    description: LOCAL,
    responses: {
      200: { description: 'OpenAPI 3.1.', content: { 'application/json': { schema: { type: 'object' } } } },
      ...errors(...GUARDED),
    },
  }),
};

/** `POST /login/link`: served by the front end's access guard (local/access/guard.ts), around the API. */
export const LOGIN_LINK: Route = {
  method: 'post',
  path: '/login/link',
  doc: () => ({
    operationId: 'loginLink',
    tags: ['health'],
    summary: 'A one-time sign-in link for the console (the API token only)',
    description: LOCAL,
    parameters: [{ name: 'next', in: 'query', required: false, description: 'The console page to land on.', schema: { type: 'string' } }],
    responses: { 200: { description: 'The link, good once.', content: json('LoginLink') }, ...errors(...GUARDED) },
  }),
};

/**
 * Every route a client uses, on any home, in the order the description lists them: each is declared once, in its
 * route group's file, which serves it from the same declaration (test/unit/openapi.test.ts holds the two together).
 */
export const ROUTES: readonly Route[] = [
  GEMINI_WEBHOOK,
  OPENAI_WEBHOOK,
  AZURE_OPENAI_WEBHOOK,
  ...OPERATIONS_ROUTES,
  UNPROCESSABLE,
  ...CHANGES_ROUTES,
  ...EFFECTS_ADMIN_ROUTES,
  LOGIN_LINK,
  HEALTH,
  METRICS,
  OPENAPI,
];

function paths(): Json {
  const paths: Record<string, Json> = {};
  for (const route of ROUTES) paths[route.path] = { ...paths[route.path], [route.method]: route.doc() };
  return paths;
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
