/** `GET /healthz`: whether this instance and its store answer (no credential: the front end's guard lets it through). */
import { Hono } from 'hono';
import { RETRY_AFTER_SECONDS } from '../../../core/failures.ts';
import type { ProviderName } from '../../../core/lifecycle.ts';
import type { StoreHealth } from '../../ports.ts';
import type { CredentialStatus } from '../../reconcile/credentials.ts';
import { errorOf, IN_APP, json, ref, retryAfter } from '../describe.ts';
import { type Route, serve } from './common.ts';

export interface HealthDeps {
  /** Whether the store answers (the local runtime); without it `/healthz` reports the process only. */
  health?: () => Promise<StoreHealth>;
  /** Whether Gemini takes each labelled API key (GEMINI_API_KEYS): `/healthz` names a refused one, by label. */
  geminiKeys?: () => CredentialStatus[];
  /** Whether each other provider takes each of its keys: `/healthz` names a refused one, by provider and label. */
  providerKeys?: () => ReadonlyMap<ProviderName, { all(): CredentialStatus[] }>;
}

export const HEALTH: Route = {
  method: 'get',
  path: '/healthz',
  doc: () => ({
    operationId: 'health',
    tags: ['health'],
    summary: 'Whether this instance and its store answer',
    security: [],
    responses: {
      200: { description: 'Serving (a key a provider refuses is named, by provider and label).', content: json('Health') },
      503: {
        description:
          'The store does not answer (local runtime); inside an app, before its store was first reached or after `close()`, an Error.',
        headers: retryAfter,
        content: { 'application/json': { schema: { anyOf: [ref('Health'), errorOf(IN_APP)] } } },
      },
    },
  }),
};

export function healthRoutes(deps: HealthDeps): Hono {
  const app = new Hono();
  serve(app, HEALTH, async (c) => {
    const health = await deps.health?.();
    if (health !== undefined && health !== 'ok') {
      c.header('retry-after', String(RETRY_AFTER_SECONDS));
      return c.json({ status: 'degraded', store: 'unavailable', reason: health.unavailable }, 503);
    }
    // A key a provider refuses stops only its own jobs' polls: said here (by label, never the key), the instance still serves.
    const refusedOf = (keys: CredentialStatus[]) =>
      // A single key (GEMINI_API_KEY, OPENAI_API_KEY…) has no label: its refusal is said without one.
      keys.filter((key) => key.state === 'refused').map(({ label, status, at }) => ({ ...(label && { label }), status, at }));
    const refused = refusedOf(deps.geminiKeys?.() ?? []);
    const others = [...(deps.providerKeys?.() ?? new Map()).entries()].flatMap(([provider, keys]) => {
      const theirs = refusedOf(keys.all());
      return theirs.length > 0 ? [[provider, { refused: theirs }] as const] : [];
    });
    return c.json({
      status: 'ok',
      ...(refused.length > 0 && { geminiKeys: { refused } }),
      ...(others.length > 0 && { providerKeys: Object.fromEntries(others) }),
    });
  });
  return app;
}
