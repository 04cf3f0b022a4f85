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

export interface AppDeps extends GeminiWebhookDeps, OperationsDeps, HealthDeps {
  /** Where the app is mounted (inside an app): the server `GET /openapi.json` names. */
  basePath?: string;
  /** `GET /changes` and `GET /changes/stream` (the local runtime's change feed); without it they are 404. */
  changes?: ChangesOptions;
  /** `GET /effects/dead-letters` and `POST /effects/redrive` (the local runtime's effects admin); without it they are 404. */
  effectsAdmin?: EffectsAdminDeps;
  /** `GET /metrics` (the local runtime's Prometheus exposition); without it that route is 404. */
  exposition?: MetricsExposition;
}

export function createApp(deps: AppDeps): Hono {
  const app = new Hono();
  app.route('/', healthRoutes(deps));
  app.route('/', geminiWebhookRoutes(deps));
  app.route('/', operationsRoutes(deps));
  // Authentic deliveries that could never be used (answered 200 all the same), newest first.
  if (deps.unprocessable) app.route('/', decisionsRoutes(deps.unprocessable));
  app.route('/', openApiRoutes(deps.basePath));
  if (deps.effectsAdmin)
    app.route('/', effectsAdminRoutes({ ...deps.effectsAdmin, logger: deps.logger, originAllowed: deps.originAllowed }));
  if (deps.exposition) app.route('/', metricsRoutes(deps.exposition));
  if (deps.changes) app.route('/', changesRoutes(deps.changes));
  app.notFound(noSuchRoute);
  app.onError(answerThrown(deps.logger));
  return app;
}
