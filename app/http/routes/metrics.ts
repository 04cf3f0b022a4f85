/** `GET /metrics`: the exposition a front end hands in (the local runtime's Prometheus text), behind the API token. */
import { Hono } from 'hono';
import { errors, GUARDED, LOCAL } from '../describe.ts';
import { type Route, serve } from './common.ts';

/** What `GET /metrics` serves: its content type, and the text read at each scrape. */
export interface MetricsExposition {
  contentType: string;
  scrape(): Promise<string>;
}

export const METRICS: Route = {
  method: 'get',
  path: '/metrics',
  doc: () => ({
    operationId: 'metrics',
    tags: ['health'],
    summary: 'Metrics in the Prometheus text format (scrape with the API token as a bearer token)',
    description: `${LOCAL} This instance's counters and histograms, and the database's gauges read at each scrape: the names in docs/operations.md.`,
    responses: {
      200: { description: 'The exposition, text format 0.0.4.', content: { 'text/plain': { schema: { type: 'string' } } } },
      ...errors(...GUARDED),
    },
  }),
};

export function metricsRoutes(exposition: MetricsExposition): Hono {
  const app = new Hono();
  serve(app, METRICS, async (c) =>
    c.body(await exposition.scrape(), 200, { 'content-type': exposition.contentType, 'cache-control': 'no-store' }),
  );
  return app;
}
