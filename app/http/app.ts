/**
 * The HTTP API, one Hono app for API Gateway (via hono/aws-lambda) and for the
 * local runtime (via @hono/node-server): the route groups of routes/ joined
 * with `route()`, each given only what it serves, and one onError. A front
 * end mounts its own guard and pages around it, never inside.
 */
import { Hono } from 'hono';
import { type ChangesOptions, changesRoutes } from './routes/changes.ts';
import { answerThrown, noSuchRoute } from './routes/common.ts';
import { decisionsRoutes } from './routes/decisions.ts';
import { type EffectsAdminDeps, effectsAdminRoutes } from './routes/effects-admin.ts';
import { type GeminiWebhookDeps, geminiWebhookRoutes } from './routes/gemini-webhook.ts';
import { type HealthDeps, healthRoutes } from './routes/health.ts';
import { type MetricsExposition, metricsRoutes } from './routes/metrics.ts';
import { openApiRoutes } from './routes/openapi.ts';
import { type OperationsDeps, operationsRoutes } from './routes/operations.ts';
import { type ProviderWebhookDeps, providerWebhookRoutes } from './routes/provider-webhooks.ts';

export interface AppDeps extends GeminiWebhookDeps, ProviderWebhookDeps, OperationsDeps, HealthDeps {
  /** Where the app is mounted (inside an app): the server `GET /openapi.json` names. */
  basePath?: string;
}

export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  app.route('/', healthRoutes(deps));
  app.route('/', geminiWebhookRoutes(deps));
  app.route('/', providerWebhookRoutes(deps));
  app.route('/', operationsRoutes(deps));
  // Authentic deliveries that could never be used (answered 200 all the same), newest first.
  if (deps.unprocessable) app.route('/', decisionsRoutes(deps.unprocessable));
  app.route('/', openApiRoutes(deps.basePath));
  app.notFound(noSuchRoute);
  app.onError(answerThrown(deps.logger));
  return app;
}

export interface LocalRoutesDeps extends Pick<AppDeps, 'logger' | 'originAllowed'> {
  /** `GET /changes` and `GET /changes/stream`: the change feed. */
  changes: ChangesOptions;
  /** `GET /effects/dead-letters` and `POST /effects/redrive`. */
  effectsAdmin: EffectsAdminDeps;
  /** `GET /metrics`: the Prometheus exposition. */
  exposition: MetricsExposition;
}

/**
 * The routes only the homes off AWS serve (the change feed, the effects
 * admin, `/metrics`), joined to the API `createApp` made, under its one
 * onError. A function of its own, which the AWS API function never calls:
 * its bundle then holds none of their code (only their descriptions).
 */
export function withLocalRoutes(api: Hono, deps: LocalRoutesDeps): Hono {
  api.route('/', effectsAdminRoutes({ ...deps.effectsAdmin, logger: deps.logger, originAllowed: deps.originAllowed }));
  api.route('/', metricsRoutes(deps.exposition));
  api.route('/', changesRoutes(deps.changes));
  return api;
}
