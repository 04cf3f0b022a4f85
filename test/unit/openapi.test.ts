/**
 * The OpenAPI description (app/http/openapi.ts): the committed copy is what
 * the routes' schemas generate, Redocly's strictest ruleset finds nothing in
 * it, and every route the app serves to a client is in it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { describe, expect, it } from 'vitest';
import type { ChangeFeedPort } from '../../app/feed.ts';
import { createApp } from '../../app/http/app.ts';
import { openApiDocument, openApiText } from '../../app/http/openapi.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { effectsAdminRoutes } from '../../local/assemble.ts';
import { feedRoutes } from '../../local/feed/routes.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { silentLogger } from '../support/silent-logger.ts';

const committed = readFileSync(join(PROJECT_ROOT, 'docs', 'openapi.json'), 'utf8');

describe('the OpenAPI description', () => {
  it('is committed as generated (npm run openapi writes it)', () => {
    expect(committed).toBe(openApiText());
  });

  it('is valid OpenAPI 3.1 with no problem under Redocly’s recommended-strict rules', async () => {
    const config = await createConfig({
      extends: ['recommended-strict'],
      // /healthz answers anyone and anything with 200 or 503: it has no 4xx to describe.
      rules: { 'operation-4xx-response': 'off' },
    } as Parameters<typeof createConfig>[0]);
    const problems = await lintFromString({ source: committed, absoluteRef: 'docs/openapi.json', config } as Parameters<
      typeof lintFromString
    >[0]);
    expect(problems.map((p) => `${p.ruleId}: ${p.message} at ${p.location[0]?.pointer}`)).toEqual([]);
    expect(JSON.parse(committed).openapi).toBe('3.1.0');
  });

  it('names where it is mounted as its server, and nothing else differs', () => {
    const mounted = openApiDocument('/api/ratchet');
    expect(mounted.servers).toEqual([{ url: '/api/ratchet', description: 'where this Ratchet is mounted' }]);
    expect({ ...mounted, servers: [] }).toEqual({ ...openApiDocument(), servers: [] });
  });

  it('describes every route the app serves to a client (the console’s pages and sign-in forms are not an API)', () => {
    const store = new MemoryStore();
    const app = createApp({
      store,
      receipts: store,
      unprocessable: store,
      queries: { list: async () => ({ operations: [] }), describe: async () => undefined },
      history: { list: async () => [] },
      decisions: { decisions: async () => [] },
      verifier: new WebhookSignatureVerifier(async () => ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw']),
      logger: silentLogger,
      extraRoutes: (routes, { sameOriginJson, fail }) => {
        effectsAdminRoutes(routes, { sameOriginJson, fail, effects: undefined, redrive: async () => ({ redriven: [], skipped: [] }) });
        feedRoutes(routes, {} as ChangeFeedPort, { keepAliveMs: 1_000, stallMs: 1_000 });
      },
    });
    const paths = openApiDocument().paths as Record<string, Record<string, unknown>>;
    // Hono's one route for a record, its history and its decisions (the name holds `/`).
    const templates = (path: string) =>
      path === '/operations/:path{.+}' ? ['/operations/{name}', '/operations/{name}/history', '/operations/{name}/decisions'] : [path];
    const served = app.routes.filter((route) => route.method !== 'ALL');
    expect(served.length).toBeGreaterThan(8);
    const undescribed = served.flatMap((route) =>
      templates(route.path)
        .filter((template) => !paths[template]?.[route.method.toLowerCase()])
        .map((t) => `${route.method} ${t}`),
    );
    expect(undescribed).toEqual([]);
  });
});
