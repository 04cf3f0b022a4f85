/**
 * The effects admin (the local runtime's): list the dead letters, re-drive
 * them (what `ratchet redrive` and the console's button call).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { Hono } from 'hono';
import type { EffectsRecords, Engine } from '../../engine.ts';
import { RedriveRequest } from '../api-schemas.ts';
import { errors, GUARDED, json, LOCAL } from '../describe.ts';
import { fail, type OriginAllowed, type Route, sameOriginJson, serve } from './common.ts';

export interface EffectsAdminDeps {
  /** The effects' records; undefined where effects are off (both routes then answer 404 saying so). */
  effects: EffectsRecords | undefined;
  redrive: Engine['redrive'];
}

export const DEAD_LETTERS: Route = {
  method: 'get',
  path: '/effects/dead-letters',
  doc: () => ({
    operationId: 'listDeadLetters',
    tags: ['effects'],
    summary: 'Effects set aside after their retries, and records that could not be read',
    description: LOCAL,
    responses: {
      200: { description: 'Every dead letter.', content: json('DeadLetterList') },
      ...errors('not-found', ...GUARDED),
    },
  }),
};

export const REDRIVE: Route = {
  method: 'post',
  path: '/effects/redrive',
  doc: () => ({
    operationId: 'redrive',
    tags: ['effects'],
    summary: 'Send dead letters again (or drop one with `skip`)',
    description: LOCAL,
    requestBody: { required: true, content: json('RedriveRequest') },
    responses: {
      200: { description: 'What was sent again and what was dropped, by `name#version`.', content: json('RedriveAnswer') },
      ...errors('malformed-request', 'unsupported-media-type', 'not-found', ...GUARDED),
    },
  }),
};

export const EFFECTS_ADMIN_ROUTES: Route[] = [DEAD_LETTERS, REDRIVE];

export function effectsAdminRoutes(deps: EffectsAdminDeps & { logger: Logger; originAllowed?: OriginAllowed }): Hono {
  const { effects } = deps;
  const app = new Hono();
  serve(app, DEAD_LETTERS, async (c) => {
    if (!effects) return fail('not-found', 'effects are off (EFFECTS_WEBHOOK_URL is not set)');
    return c.json({ deadLetters: await effects.deadLetters.list(), undecodable: await effects.deadLetters.listUndecodable() });
  });
  serve(app, REDRIVE, sameOriginJson(deps.logger, deps.originAllowed), async (c) => {
    if (!effects) return fail('not-found', 'effects are off (EFFECTS_WEBHOOK_URL is not set)');
    const request = RedriveRequest.safeParse(await c.req.json().catch(() => undefined));
    if (!request.success) return fail('malformed-request', 'body must be {"name"?: "<operation>", "skip"?: "<name>#<version>"}');
    try {
      return c.json(await deps.redrive(request.data));
    } catch (error) {
      // The derived-work process is restarting, or stopped before it answered: try again (a repeat is harmless, the ledger delivers each effect once).
      return fail('not-recorded', (error as Error).message);
    }
  });
  return app;
}
