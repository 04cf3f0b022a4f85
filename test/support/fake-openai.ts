/**
 * A fake OpenAI on 127.0.0.1, enough for the real `openai` SDK (v6) to create, get and list the five kinds of
 * long-running job Ratchet tracks: batches, background responses, videos (and their remixes), fine-tuning jobs and
 * eval runs. A test moves a job along with `set` (the builders below make the objects as the API answers them);
 * faults are per key (429 with Retry-After, 401) and a latency for every answer. `openaiDelivery` signs a webhook
 * delivery as OpenAI sends it (Standard Webhooks).
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type OpenAI from 'openai';
import { Webhook } from 'standardwebhooks';
import { answer, defined, fieldsOf, hex, listen, newestFirst, type Over, pageOf, pause, RateLimits } from './fake-http.ts';

export type OpenAIJobKind = 'batch' | 'response' | 'video' | 'fine-tuning' | 'eval-run';

export interface FakeOpenAI {
  /** The base URL for `new OpenAI({ baseURL: url, apiKey })`: `http://127.0.0.1:PORT/v1`. */
  url: string;
  /** Sets (or replaces) a job's object as the API answers it: `id` (and for eval runs `eval_id`) in it. */
  set(kind: OpenAIJobKind, object: Record<string, unknown>): void;
  get(kind: OpenAIJobKind, id: string): Record<string, unknown> | undefined;
  /** Every request: method, path (without query), the API key (Bearer, or Azure's `api-key`), time. */
  requests: Array<{ method: string; path: string; apiKey: string | undefined; at: number }>;
  /** Answers 429 (with `retry-after: <seconds>`) to this key's next `count` requests (Infinity: until cleared with 0). */
  rateLimit(apiKey: string, count: number, retryAfterSeconds?: number): void;
  /** Keys answered 401 (`invalid_api_key`). */
  refuse(apiKey: string): void;
  /** Delay before each answer (default 0). */
  latencyMs: number;
  close(): Promise<void>;
}

type Job = Record<string, unknown>;

interface KindRoute {
  /** The collection's path and an item's: group 1 the eval (eval runs only, else empty), group 2 the job's id. */
  pattern: RegExp;
  /** What OpenAI's 404 calls it. */
  noun: string;
  /** The job a POST to the collection makes, at its first state. */
  create(fields: Record<string, unknown>, evalId: string): Job;
  /** The order a list is in when the caller names none (`undefined`: no list endpoint). */
  listOrder?: 'asc' | 'desc';
}

const ROUTES: Record<OpenAIJobKind, KindRoute> = {
  batch: {
    pattern: /^\/v1\/batches()(?:\/([^/]+))?$/,
    noun: 'batch',
    create: (f) =>
      openaiBatch(
        defined({
          status: 'validating',
          input_file_id: f.input_file_id,
          endpoint: f.endpoint,
          completion_window: f.completion_window,
          metadata: f.metadata,
        }),
      ),
    listOrder: 'desc',
  },
  response: {
    pattern: /^\/v1\/responses()(?:\/([^/]+))?$/,
    noun: 'response',
    // Only a background response is a job; one in the foreground is answered done.
    create: (f) =>
      openaiResponse(
        defined({
          status: f.background ? 'queued' : 'completed',
          background: Boolean(f.background),
          model: f.model,
          instructions: f.instructions,
          metadata: f.metadata,
          previous_response_id: f.previous_response_id,
        }),
      ),
  },
  video: {
    pattern: /^\/v1\/videos()(?:\/([^/]+))?$/,
    noun: 'video',
    create: (f) => openaiVideo(defined({ status: 'queued', prompt: f.prompt, model: f.model, seconds: f.seconds, size: f.size })),
    listOrder: 'desc',
  },
  'fine-tuning': {
    pattern: /^\/v1\/fine_tuning\/jobs()(?:\/([^/]+))?$/,
    noun: 'fine-tuning job',
    create: (f) =>
      openaiFineTuningJob(
        defined({
          status: 'validating_files',
          model: f.model,
          training_file: f.training_file,
          validation_file: f.validation_file,
          seed: f.seed,
          metadata: f.metadata,
        }),
      ),
    listOrder: 'desc',
  },
  'eval-run': {
    pattern: /^\/v1\/evals\/([^/]+)\/runs(?:\/([^/]+))?$/,
    noun: 'eval run',
    create: (f, evalId) =>
      openaiEvalRun(defined({ status: 'queued', eval_id: evalId, name: f.name, data_source: f.data_source, metadata: f.metadata })),
    // The runs of an eval are listed oldest first unless asked otherwise, as the API does.
    listOrder: 'asc',
  },
};

/** Starts the fake; `close()` stops it. */
export async function startFakeOpenAI(options: { latencyMs?: number } = {}): Promise<FakeOpenAI> {
  const jobs = new Map<OpenAIJobKind, Map<string, Job>>(Object.keys(ROUTES).map((kind) => [kind as OpenAIJobKind, new Map()]));
  const limits = new RateLimits();
  const refused = new Set<string>();
  const requests: FakeOpenAI['requests'] = [];

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const method = req.method ?? 'GET';
    // A Bearer token, or Azure OpenAI's `api-key` header (the SDK's AzureOpenAI sends a key so).
    const azureKey = req.headers['api-key'];
    const apiKey = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? (typeof azureKey === 'string' ? azureKey : undefined);
    requests.push({ method, path: url.pathname, apiKey, at: Date.now() });
    const fields = method === 'POST' ? await fieldsOf(req) : {};
    await pause(fake.latencyMs);
    const headers = { 'x-request-id': `req_${hex(16)}` };
    const fail = (status: number, message: string, type: string, code: string | null, more: Record<string, string> = {}) =>
      answer(res, status, { error: { message, type, param: null, code } }, { ...headers, ...more });

    if (apiKey === undefined)
      return fail(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization header.",
        'invalid_request_error',
        null,
      );
    if (refused.has(apiKey))
      return fail(
        401,
        `Incorrect API key provided: ${apiKey.slice(0, 3)}***. You can find your API key at https://platform.openai.com/account/api-keys.`,
        'invalid_request_error',
        'invalid_api_key',
      );
    const limited = limits.take(apiKey);
    if (limited)
      return fail(429, 'Rate limit reached for requests. Please try again later.', 'requests', 'rate_limit_exceeded', {
        'retry-after': String(limited.retryAfterSeconds),
      });

    // A remix is a new video job, made from one there is.
    const remixOf = /^\/v1\/videos\/([^/]+)\/remix$/.exec(url.pathname)?.[1];
    if (remixOf !== undefined && method === 'POST') {
      const source = jobs.get('video')?.get(decodeURIComponent(remixOf));
      if (!source) return fail(404, `No video found with id '${decodeURIComponent(remixOf)}'.`, 'invalid_request_error', null);
      const { model, seconds, size, id } = source;
      const video = openaiVideo(defined({ status: 'queued', prompt: fields.prompt, model, seconds, size, remixed_from_video_id: id }));
      jobs.get('video')?.set(video.id as string, video);
      return answer(res, 200, video, headers);
    }
    for (const [kind, route] of Object.entries(ROUTES) as Array<[OpenAIJobKind, KindRoute]>) {
      const match = route.pattern.exec(url.pathname);
      if (!match) continue;
      const [, evalId = '', id] = match.map((part) => (part === undefined ? part : decodeURIComponent(part)));
      const ofKind = jobs.get(kind) as Map<string, Job>;
      if (id !== undefined && method === 'GET') {
        const job = ofKind.get(id);
        if (!job || (kind === 'eval-run' && job.eval_id !== evalId))
          return fail(404, `No ${route.noun} found with id '${id}'.`, 'invalid_request_error', null);
        return answer(res, 200, job, headers);
      }
      if (id === undefined && method === 'POST') {
        const job = route.create(fields, evalId);
        ofKind.set(job.id as string, job);
        return answer(res, 200, job, headers);
      }
      if (id === undefined && method === 'GET' && route.listOrder) {
        const all = newestFirst(
          [...ofKind.values()].filter((job) => kind !== 'eval-run' || job.eval_id === evalId),
          (job) => Number(job.created_at),
        );
        if ((url.searchParams.get('order') ?? route.listOrder) === 'asc') all.reverse();
        const limit = Math.min(Math.max(Number(url.searchParams.get('limit')) || 20, 1), 100);
        const { page, more } = pageOf(all, (job) => String(job.id), { limit, after: url.searchParams.get('after') ?? undefined });
        const ids = page.map((job) => String(job.id));
        return answer(
          res,
          200,
          { object: 'list', data: page, first_id: ids[0] ?? null, last_id: ids.at(-1) ?? null, has_more: more },
          headers,
        );
      }
    }
    fail(404, `Invalid URL (${method} ${url.pathname})`, 'invalid_request_error', null);
  }

  const server = await listen(handle);
  const fake: FakeOpenAI = {
    url: `${server.origin}/v1`,
    set(kind, object) {
      if (typeof object.id !== 'string') throw new Error(`an OpenAI ${kind} needs its id`);
      if (kind === 'eval-run' && typeof object.eval_id !== 'string') throw new Error('an eval run needs its eval_id');
      jobs.get(kind)?.set(object.id, structuredClone(object));
    },
    get(kind, id) {
      const job = jobs.get(kind)?.get(id);
      return job && structuredClone(job);
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

/** Unix seconds now. */
function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/**
 * The times a job has reached, in order, each `[field, seconds after the one before]`: from `start` when given, else
 * placed so that the last is now (a job built at any status has no time in the future).
 */
function timeline(steps: Array<[string, number]>, start?: unknown): Record<string, number> {
  const span = steps.reduce((sum, [, gap]) => sum + gap, 0);
  let at = typeof start === 'number' ? start : nowSeconds() - span;
  const times: Record<string, number> = {};
  for (const [field, gap] of steps) {
    at += gap;
    times[field] = at;
  }
  return times;
}

const BATCH_STEPS: Record<string, Array<[string, number]>> = {
  validating: [['created_at', 0]],
  failed: [
    ['created_at', 0],
    ['failed_at', 60],
  ],
  in_progress: [
    ['created_at', 0],
    ['in_progress_at', 60],
  ],
  finalizing: [
    ['created_at', 0],
    ['in_progress_at', 60],
    ['finalizing_at', 600],
  ],
  completed: [
    ['created_at', 0],
    ['in_progress_at', 60],
    ['finalizing_at', 600],
    ['completed_at', 60],
  ],
  // Past its 24-hour window (expires_at is created_at + 24 h).
  expired: [
    ['created_at', 0],
    ['in_progress_at', 60],
    ['expired_at', 86_400],
  ],
  cancelling: [
    ['created_at', 0],
    ['in_progress_at', 60],
    ['cancelling_at', 60],
  ],
  cancelled: [
    ['created_at', 0],
    ['in_progress_at', 60],
    ['cancelling_at', 60],
    ['cancelled_at', 60],
  ],
};

/** Request counts by batch status: what a batch of 100 requests has done by then. */
const BATCH_COUNTS: Record<string, { total: number; completed: number; failed: number }> = {
  in_progress: { total: 100, completed: 40, failed: 0 },
  finalizing: { total: 100, completed: 98, failed: 2 },
  completed: { total: 100, completed: 98, failed: 2 },
  expired: { total: 100, completed: 60, failed: 40 },
  cancelling: { total: 100, completed: 30, failed: 0 },
  cancelled: { total: 100, completed: 30, failed: 0 },
};

/** A batch as `GET /v1/batches/{id}` answers it, its times, counts, files and usage those of its status. */
export function openaiBatch(over: Over<OpenAI.Batches.Batch> = {}): Record<string, unknown> {
  const status = String(over.status ?? 'validating');
  const times = timeline(BATCH_STEPS[status] ?? [['created_at', 0]], over.created_at);
  const counts = BATCH_COUNTS[status] ?? { total: 0, completed: 0, failed: 0 };
  const created = times.created_at as number;
  return {
    id: `batch_${hex(16)}`,
    object: 'batch',
    endpoint: '/v1/chat/completions',
    model: 'gpt-4o-mini-2024-07-18',
    errors:
      status === 'failed'
        ? {
            object: 'list',
            data: [{ code: 'invalid_json_line', message: 'This line is not parseable as valid JSON.', param: null, line: 1 }],
          }
        : null,
    input_file_id: `file-${hex(11)}`,
    completion_window: '24h',
    status,
    output_file_id: counts.completed > 0 && status !== 'in_progress' && status !== 'cancelling' ? `file-${hex(11)}` : null,
    error_file_id: counts.failed > 0 && status !== 'finalizing' ? `file-${hex(11)}` : null,
    created_at: created,
    in_progress_at: null,
    expires_at: created + 86_400,
    finalizing_at: null,
    completed_at: null,
    failed_at: null,
    expired_at: null,
    cancelling_at: null,
    cancelled_at: null,
    ...times,
    request_counts: counts,
    usage: {
      input_tokens: counts.completed * 120,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: counts.completed * 40,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: counts.completed * 160,
    },
    metadata: null,
    ...over,
  };
}

/** A response as `GET /v1/responses/{id}` answers it (a background one unless told otherwise). */
export function openaiResponse(over: Over<OpenAI.Responses.Response> = {}): Record<string, unknown> {
  const status = String(over.status ?? 'queued');
  const done = status === 'completed' || status === 'incomplete';
  const times = timeline(
    status === 'completed'
      ? [
          ['created_at', 0],
          ['completed_at', 30],
        ]
      : [['created_at', 0]],
    over.created_at,
  );
  const text = status === 'completed' ? 'Done.' : 'Partly';
  return {
    id: `resp_${hex(24)}`,
    object: 'response',
    created_at: times.created_at,
    status,
    background: true,
    completed_at: times.completed_at ?? null,
    error: status === 'failed' ? { code: 'server_error', message: 'The model failed to generate a response.' } : null,
    incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: null,
    max_output_tokens: null,
    model: 'gpt-5-2025-08-07',
    output: done
      ? [
          {
            id: `msg_${hex(24)}`,
            type: 'message',
            status: status === 'completed' ? 'completed' : 'incomplete',
            role: 'assistant',
            content: [{ type: 'output_text', text, annotations: [], logprobs: [] }],
          },
        ]
      : [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: 'medium', summary: null },
    service_tier: 'auto',
    temperature: 1,
    text: { format: { type: 'text' }, verbosity: 'medium' },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: done
      ? {
          input_tokens: 12,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 5,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: 17,
        }
      : null,
    user: null,
    metadata: {},
    ...over,
  };
}

const VIDEO_PROGRESS: Record<string, number> = { queued: 0, in_progress: 40, completed: 100, failed: 0 };

/** A video job as `GET /v1/videos/{id}` answers it; a completed one's assets expire an hour after it. */
export function openaiVideo(over: Over<OpenAI.Videos.Video> = {}): Record<string, unknown> {
  const status = String(over.status ?? 'queued');
  const times = timeline(
    status === 'completed'
      ? [
          ['created_at', 0],
          ['completed_at', 120],
        ]
      : [['created_at', 0]],
    over.created_at,
  );
  return {
    id: `video_${hex(24)}`,
    object: 'video',
    created_at: times.created_at,
    completed_at: times.completed_at ?? null,
    expires_at: times.completed_at === undefined ? null : times.completed_at + 3_600,
    error: status === 'failed' ? { code: 'internal_error', message: 'Video generation failed.' } : null,
    model: 'sora-2',
    progress: VIDEO_PROGRESS[status] ?? 0,
    prompt: 'A calico cat playing a piano on stage',
    remixed_from_video_id: null,
    seconds: '4',
    size: '720x1280',
    status,
    ...over,
  };
}

/** A fine-tuning job as `GET /v1/fine_tuning/jobs/{id}` answers it; a finished one has its model, files and tokens. */
export function openaiFineTuningJob(over: Over<OpenAI.FineTuning.Jobs.FineTuningJob> = {}): Record<string, unknown> {
  const status = String(over.status ?? 'validating_files');
  const finished = status === 'succeeded' || status === 'failed';
  const times = timeline(
    finished
      ? [
          ['created_at', 0],
          ['finished_at', 1_800],
        ]
      : [['created_at', 0]],
    over.created_at,
  );
  const hyperparameters = { batch_size: 'auto', learning_rate_multiplier: 'auto', n_epochs: 'auto' };
  return {
    id: `ftjob-${hex(12)}`,
    object: 'fine_tuning.job',
    created_at: times.created_at,
    error:
      status === 'failed'
        ? { code: 'invalid_training_file', message: 'The training file is not valid JSONL.', param: 'training_file' }
        : null,
    estimated_finish: status === 'running' ? (times.created_at as number) + 1_800 : null,
    fine_tuned_model: status === 'succeeded' ? `ft:gpt-4o-mini-2024-07-18:ratchet::${hex(4)}` : null,
    finished_at: times.finished_at ?? null,
    hyperparameters,
    integrations: null,
    metadata: null,
    method: { type: 'supervised', supervised: { hyperparameters } },
    model: 'gpt-4o-mini-2024-07-18',
    organization_id: `org-${hex(12)}`,
    result_files: status === 'succeeded' ? [`file-${hex(11)}`] : [],
    seed: 42,
    status,
    trained_tokens: status === 'succeeded' ? 24_000 : null,
    training_file: `file-${hex(11)}`,
    validation_file: null,
    ...over,
  };
}

/** Result counts by eval run status: what a run over 10 items has judged by then. */
const EVAL_COUNTS: Record<string, { total: number; passed: number; failed: number; errored: number }> = {
  in_progress: { total: 10, passed: 3, failed: 1, errored: 0 },
  completed: { total: 10, passed: 8, failed: 2, errored: 0 },
};

/** An eval run as `GET /v1/evals/{eval_id}/runs/{run_id}` answers it. */
export function openaiEvalRun(over: Over<OpenAI.Evals.Runs.RunRetrieveResponse> = {}): Record<string, unknown> {
  const status = String(over.status ?? 'queued');
  const id = typeof over.id === 'string' ? over.id : `evalrun_${hex(16)}`;
  const evalId = typeof over.eval_id === 'string' ? over.eval_id : `eval_${hex(16)}`;
  const counts = EVAL_COUNTS[status] ?? { total: 0, passed: 0, failed: 0, errored: 0 };
  const model = 'gpt-4o-mini';
  return {
    id,
    object: 'eval.run',
    created_at: timeline([['created_at', 0]], over.created_at).created_at,
    data_source: { type: 'jsonl', source: { type: 'file_id', id: `file-${hex(11)}` } },
    error: status === 'failed' ? { code: 'invalid_data_source', message: 'The data source could not be read.' } : null,
    eval_id: evalId,
    metadata: {},
    model,
    name: `run ${id.slice(-6)}`,
    per_model_usage:
      counts.total > 0
        ? [
            {
              model_name: model,
              invocation_count: counts.total,
              prompt_tokens: 900,
              completion_tokens: 300,
              total_tokens: 1_200,
              cached_tokens: 0,
            },
          ]
        : [],
    per_testing_criteria_results: counts.total > 0 ? [{ testing_criteria: 'accuracy', passed: counts.passed, failed: counts.failed }] : [],
    report_url: `https://platform.openai.com/evaluation/evals/${evalId}?run_id=${id}`,
    result_counts: counts,
    status,
    ...over,
  };
}

/**
 * A signed OpenAI webhook delivery (Standard Webhooks), as OpenAI sends it: body
 * `{ id: "evt_…", object: "event", created_at, type, data: { id } }` (eval runs: `data.id` is the run's id), signed
 * now. The same `eventId` gives the same `webhook-id`, as a redelivery of one event carries.
 */
export function openaiDelivery(
  secret: string,
  event: { type: string; id: string; createdAt?: number; eventId?: string },
): { body: string; headers: Record<string, string> } {
  const eventId = event.eventId ?? `evt_${hex(16)}`;
  const body = JSON.stringify({
    id: eventId,
    object: 'event',
    created_at: event.createdAt ?? nowSeconds(),
    type: event.type,
    data: { id: event.id },
  });
  const webhookId = `wh_${createHash('sha256').update(eventId).digest('hex').slice(0, 32)}`;
  const timestamp = new Date(nowSeconds() * 1000);
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'OpenAI/1.0 (+https://platform.openai.com/docs/webhooks)',
      'webhook-id': webhookId,
      'webhook-timestamp': String(timestamp.getTime() / 1000),
      'webhook-signature': new Webhook(secret).sign(webhookId, timestamp, body),
    },
  };
}
