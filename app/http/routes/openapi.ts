/** `GET /openapi.json`: the description (app/http/openapi.ts), behind the credential like every route but the webhook and /healthz. */
import { Hono } from 'hono';
import { OPENAPI, openApiText } from '../openapi.ts';
import { serve } from './common.ts';

/** `basePath`: where the app is mounted (inside an app), the server the description names. */
export function openApiRoutes(basePath?: string): Hono {
  const app = new Hono();
  serve(app, OPENAPI, async (c) => c.body(openApiText(basePath), 200, { 'content-type': 'application/json' }));
  return app;
}
