/**
 * A fake Anthropic API on 127.0.0.1, enough for the real `@anthropic-ai/sdk` to create, get and list Message
 * Batches (`/v1/messages/batches`). A test moves a batch along with `set` (`anthropicBatch` makes one as the API
 * answers it); faults are per key (429 with Retry-After, 401) and a latency for every answer. Errors are in
 * Anthropic's shape: `{ type: 'error', error: { type, message }, request_id }`.
 */

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type Anthropic from '@anthropic-ai/sdk';
import { answer, fieldsOf, listen, newestFirst, type Over, pageOf, pause, RateLimits } from './fake-http.ts';

export interface FakeAnthropic {
  /** The base URL for `new Anthropic({ baseURL: url, apiKey })` (no `/v1`: the SDK's paths carry it). */
  url: string;
  /** Sets (or replaces) a batch's object as the API answers it (`id` in it). */
  set(batch: Record<string, unknown>): void;
  get(id: string): Record<string, unknown> | undefined;
  /** Every request: method, path (without query), the API key (`x-api-key`, or the Bearer token the SDK sends it as), time. */
  requests: Array<{ method: string; path: string; apiKey: string | undefined; at: number }>;
  /** Answers 429 (with `retry-after: <seconds>`) to this key's next `count` requests (Infinity: until cleared with 0). */
  rateLimit(apiKey: string, count: number, retryAfterSeconds?: number): void;
  /** Keys answered 401 (`authentication_error`). */
  refuse(apiKey: string): void;
  /** Delay before each answer (default 0). */
  latencyMs: number;
  close(): Promise<void>;
}

const COLLECTION = '/v1/messages/batches';
const ITEM = /^\/v1\/messages\/batches\/([^/]+)$/;

/** Starts the fake; `close()` stops it. */
export async function startFakeAnthropic(options: { latencyMs?: number } = {}): Promise<FakeAnthropic> {
  const batches = new Map<string, Record<string, unknown>>();
  const limits = new RateLimits();
  const refused = new Set<string>();
  const requests: FakeAnthropic['requests'] = [];

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const method = req.method ?? 'GET';
    // The key as `x-api-key` (the API's documented header, older SDKs) or `Authorization: Bearer` (the SDK since 1.x).
    const header = req.headers['x-api-key'];
    const apiKey = typeof header === 'string' ? header : /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    requests.push({ method, path: url.pathname, apiKey, at: Date.now() });
    const fields = method === 'POST' ? await fieldsOf(req) : {};
    await pause(fake.latencyMs);
    const requestId = `req_${base62(24)}`;
    const headers = { 'request-id': requestId };
    const fail = (status: number, type: string, message: string, more: Record<string, string> = {}) =>
      answer(res, status, { type: 'error', error: { type, message }, request_id: requestId }, { ...headers, ...more });

    if (apiKey === undefined) return fail(401, 'authentication_error', 'x-api-key header is required');
    if (refused.has(apiKey)) return fail(401, 'authentication_error', 'invalid x-api-key');
    const limited = limits.take(apiKey);
    if (limited)
      return fail(429, 'rate_limit_error', 'This request would exceed the rate limit for your organization. Please try again later.', {
        'retry-after': String(limited.retryAfterSeconds),
      });

    if (url.pathname === COLLECTION && method === 'POST') {
      const submitted = Array.isArray(fields.requests) ? fields.requests.length : 0;
      if (submitted === 0) return fail(400, 'invalid_request_error', 'requests: List should have at least 1 item after validation');
      const batch = anthropicBatch({ request_counts: { processing: submitted, succeeded: 0, errored: 0, canceled: 0, expired: 0 } });
      batches.set(batch.id as string, batch);
      return answer(res, 200, batch, headers);
    }
    if (url.pathname === COLLECTION && method === 'GET') {
      const all = newestFirst([...batches.values()], (batch) => Date.parse(String(batch.created_at)));
      const query = url.searchParams;
      const limit = Math.min(Math.max(Number(query.get('limit')) || 20, 1), 1000);
      const { page, more } = pageOf(all, (batch) => String(batch.id), {
        limit,
        after: query.get('after_id') ?? undefined,
        before: query.get('before_id') ?? undefined,
      });
      const ids = page.map((batch) => String(batch.id));
      return answer(res, 200, { data: page, has_more: more, first_id: ids[0] ?? null, last_id: ids.at(-1) ?? null }, headers);
    }
    const id = ITEM.exec(url.pathname)?.[1];
    if (id !== undefined && method === 'GET') {
      const batch = batches.get(decodeURIComponent(id));
      if (!batch) return fail(404, 'not_found_error', `Message batch ${decodeURIComponent(id)} not found`);
      return answer(res, 200, batch, headers);
    }
    fail(404, 'not_found_error', 'Not Found');
  }

  const server = await listen(handle);
  const fake: FakeAnthropic = {
    url: server.origin,
    set(batch) {
      if (typeof batch.id !== 'string') throw new Error('an Anthropic batch needs its id');
      batches.set(batch.id, structuredClone(batch));
    },
    get(id) {
      const batch = batches.get(id);
      return batch && structuredClone(batch);
    },
    requests,
    rateLimit(apiKey, count, retryAfterSeconds = 1) {
      limits.set(apiKey, count, retryAfterSeconds);
    },
    refuse(apiKey) {
      refused.add(apiKey);
    },
    latencyMs: options.latencyMs ?? 0,
    close: () => server.close(),
  };
  return fake;
}

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Anthropic's ids are base62 after their prefix (`msgbatch_01Hk…`). */
function base62(length: number): string {
  return [...randomBytes(length)].map((byte) => BASE62[byte % 62]).join('');
}

type RequestCounts = Anthropic.Messages.Batches.MessageBatchRequestCounts;

/** Request counts by processing status: what a batch of 10 requests has done by then. */
const COUNTS: Record<string, RequestCounts> = {
  in_progress: { processing: 10, succeeded: 0, errored: 0, canceled: 0, expired: 0 },
  canceling: { processing: 4, succeeded: 6, errored: 0, canceled: 0, expired: 0 },
  ended: { processing: 0, succeeded: 9, errored: 1, canceled: 0, expired: 0 },
};

/**
 * A Message Batch as `GET /v1/messages/batches/{id}` answers it: times in RFC 3339, a results URL once ended, the
 * cancel's time once canceling; a built one's last time is now unless `created_at` places it.
 */
export function anthropicBatch(over: Over<Anthropic.Messages.Batches.MessageBatch> = {}): Record<string, unknown> {
  const status = String(over.processing_status ?? 'in_progress');
  const id = typeof over.id === 'string' ? over.id : `msgbatch_01${base62(22)}`;
  // The steps it took: created, a cancel asked for a minute on, ended ten minutes after the last.
  const steps = [0, ...(status === 'canceling' ? [60] : []), ...(status === 'ended' ? [600] : [])];
  const span = steps.reduce((sum, gap) => sum + gap, 0) * 1000;
  const created = typeof over.created_at === 'string' ? Date.parse(over.created_at) : Date.now() - span;
  const rfc3339 = (ms: number) => new Date(ms).toISOString();
  return {
    id,
    type: 'message_batch',
    processing_status: status,
    request_counts: COUNTS[status] ?? COUNTS.in_progress,
    created_at: rfc3339(created),
    expires_at: rfc3339(created + 86_400_000),
    cancel_initiated_at: status === 'canceling' ? rfc3339(created + 60_000) : null,
    ended_at: status === 'ended' ? rfc3339(created + span) : null,
    archived_at: null,
    results_url: status === 'ended' ? `https://api.anthropic.com/v1/messages/batches/${id}/results` : null,
    ...over,
  };
}
