/**
 * The OpenAPI description (app/http/openapi.ts): the committed copy is what
 * the routes' schemas generate, Redocly's strictest ruleset finds nothing in
 * it, every route the app serves to a client is in it, and every route in it
 * is served.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { Hono } from 'hono';
import { TrieRouter } from 'hono/router/trie-router';
import { describe, expect, it } from 'vitest';
import type { ChangeFeedPort } from '../../app/feed.ts';
import { createApp, withLocalRoutes } from '../../app/http/app.ts';
import { openApiDocument, openApiText } from '../../app/http/openapi.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { AccessGuard } from '../../local/access/guard.ts';
import { MemoryStore } from '../support/memory-store.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { silentLogger } from '../support/silent-logger.ts';

const committed = readFileSync(join(PROJECT_ROOT, 'docs', 'openapi.json'), 'utf8');

/** A receiver for the routes only: this test never posts to them. */
const unanswered = async (): Promise<never> => {
  throw new Error('not called');
};

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

  it('describes every route the API and its guard serve, and serves every route it describes (the console’s pages and sign-in forms are not an API)', () => {
    const store = new MemoryStore();
    const api = createApp({
      store,
      receipts: store,
      unprocessable: store,
      queries: { list: async () => ({ operations: [] }), describe: async () => undefined },
      history: { list: async () => [] },
      decisions: { decisions: async () => [] },
      verifier: new WebhookSignatureVerifier(async () => ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw']),
      logger: silentLogger,
      providerWebhooks: { openai: unanswered, 'azure-openai': unanswered },
    });
    withLocalRoutes(api, {
      logger: silentLogger,
      changes: { feed: {} as ChangeFeedPort, keepAliveMs: 1_000, stallMs: 1_000 },
      effectsAdmin: { effects: undefined, redrive: async () => ({ redriven: [], skipped: [] }) },
      exposition: { contentType: 'text/plain', scrape: async () => '' },
    });
    // As the local runtime composes it (local/open.ts): the access guard, which serves the sign-in link, around the API.
    const app = new Hono();
    new AccessGuard({
      tokens: ['a-token-of-at-least-32-characters-0123'],
      publicUrls: [],
      trackRatePerMinute: 60,
      logger: silentLogger,
    }).install(app);
    app.route('/', api);
    const signInForms = ['GET /login', 'POST /login', 'POST /logout'];
    const served = app.routes.filter((route) => route.method !== 'ALL' && !signInForms.includes(`${route.method} ${route.path}`));
    const described = Object.entries(openApiDocument().paths as Record<string, Record<string, unknown>>).flatMap(([path, methods]) =>
      Object.keys(methods).map((method) => ({ method: method.toUpperCase(), path })),
    );
    expect(served.length).toBeGreaterThan(12);
    expect(described.length).toBeGreaterThan(12);
    /** Whether Hono would send a request for the described path to `route` (`{name}` an operation's name, which holds `/`). */
    const serves = (route: { method: string; path: string }, path: { method: string; path: string }) => {
      const router = new TrieRouter<true>();
      router.add(route.method, route.path, true);
      return router.match(path.method, path.path.replaceAll('{name}', 'batches/b1'))[0].length > 0;
    };
    const undescribed = served.filter((route) => !described.some((path) => serves(route, path))).map((r) => `${r.method} ${r.path}`);
    const unserved = described.filter((path) => !served.some((route) => serves(route, path))).map((p) => `${p.method} ${p.path}`);
    expect({ undescribed, unserved }).toEqual({ undescribed: [], unserved: [] });
  });
});
