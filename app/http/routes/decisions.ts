/** `GET /decisions`: authentic deliveries that could never be used (answered 200 all the same), newest first. */
import { Hono } from 'hono';
import type { UnprocessableLog } from '../../ports.ts';
import { DecisionsQuery } from '../api-schemas.ts';
import { awsErrors, GUARDED, json, queryParameters } from '../describe.ts';
import { CURSOR_SAID, LIMIT_SAID, type Route, refuseParameter, serve, storeBound } from './common.ts';

export const UNPROCESSABLE: Route = {
  method: 'get',
  path: '/decisions',
  doc: () => ({
    operationId: 'listUnprocessable',
    tags: ['operations'],
    summary: 'Authentic deliveries that could never be used, newest first',
    parameters: queryParameters(DecisionsQuery, {
      outcome: '`unprocessable` (the only list kept).',
      limit: 'At most this many (1-100, default 50).',
      cursor: "The previous page's `nextCursor`.",
    }),
    responses: { 200: { description: 'A page.', content: json('UnprocessableList') }, ...awsErrors('malformed-request', ...GUARDED) },
  }),
};

/** What each parameter must be, said when it is the one refused. */
const DECISIONS_PARAMETERS: Record<keyof typeof DecisionsQuery.shape, string> = {
  outcome: "outcome must be unprocessable (one operation's decisions: GET /operations/{name}/decisions)",
  limit: LIMIT_SAID,
  cursor: CURSOR_SAID,
};

export function decisionsRoutes(unprocessable: UnprocessableLog): Hono {
  const app = new Hono();
  serve(app, UNPROCESSABLE, storeBound, async (c) => {
    const query = DecisionsQuery.safeParse(c.req.query());
    if (!query.success) return refuseParameter(c, query.error, DECISIONS_PARAMETERS);
    return c.json(await unprocessable.listUnprocessable({ limit: query.data.limit ?? 50, cursor: query.data.cursor }));
  });
  return app;
}
