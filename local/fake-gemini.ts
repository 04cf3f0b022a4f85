/**
 * A fake Gemini on 127.0.0.1 (the tests' and `npm run demo`'s), enough for the
 * real @google/genai SDK, 2.x and 3.x alike: every path is served under
 * `/v1/`, `/v1beta/` and `/v1beta1/` (the version each request named is kept
 * in `versions`).
 *
 * The Gemini API, with the API key: `GET batches/{id}`, `GET interactions/{id}`
 * and `GET {operation name}` (File Search imports and uploads among them), the
 * creates (`POST …:batchGenerateContent`, `…:asyncBatchEmbedContent`,
 * `…:predictLongRunning`, `interactions`, `fileSearchStores/{s}:importFile`,
 * and `uploadToFileSearchStore`'s resumable upload under `/upload/`),
 * `GET batches` (paged, newest first), and the static webhooks API
 * (`webhooks`: list, create, get, patch, `:ping`, `:rotateSigningSecret`),
 * whose ping is delivered signed, as Gemini does, and retried until answered 2xx.
 *
 * The Gemini Enterprise Agent Platform (formerly Vertex AI), for
 * `projects/{p}/locations/{l}/…` names: batch prediction jobs (`GET`), Veo
 * operations (`POST …/models/{m}:fetchPredictOperation`), interactions
 * (`GET`) and tuning jobs (`GET`, and `POST …/tuningJobs` as `tunings.tune`
 * makes them), with a bearer token from `POST /token` (an OAuth token exchange,
 * as Application Default Credentials of an external account make) or an
 * express-mode key. States are set by the test as time goes on; faults can be
 * injected per resource name.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

export type Fault = '429' | '500' | 'slow' | 'malformed' | '404';

export interface FakeBatch {
  state: string;
  updateTime?: string;
  createTime?: string;
  /** The Gemini API's request counts (int64 strings), answered in the batch's metadata. */
  batchStats?: { requestCount?: string; successfulRequestCount?: string; failedRequestCount?: string; pendingRequestCount?: string };
  /** A failed batch's error, on the operation as the Gemini API answers it. */
  error?: { code: number; message: string };
}

/** An Agent Platform tuning job, as `tunings.get` reads it. */
export interface FakeTuningJob {
  state: string;
  updateTime?: string;
  createTime?: string;
  tunedModel?: { model?: string; endpoint?: string };
  error?: { code: number; message: string };
}

/** How `GET /v1beta/batches` misbehaves, for the discovery sweep's paging bound. */
export type ListFault = 'token-loop' | 'empty-token';

export interface FakeOperation {
  done?: boolean;
  error?: { code: number; message: string };
  response?: Record<string, unknown>;
}

export interface FakeWebhook {
  id: string;
  name?: string;
  uri: string;
  subscribed_events: string[];
  state: string;
  /** The signing secrets deliveries are signed with, newest first; a rotated-out one until its expiry. */
  secrets: Array<{ secret: string; expireTime?: Date }>;
  create_time: string;
  update_time: string;
}

export interface FakeInteraction {
  status: string;
  updated?: string;
  /** The Interactions resource's failures (`code` is a URI). */
  errors?: Array<{ code?: string; message?: string }>;
  /** The steps answered, model output included (a video inline as base64 `data`, or as a `uri`). */
  steps?: unknown[];
  /** Token counts, as @google/genai 3.6 declares them (`total_input_tokens`, …). */
  usage?: Record<string, number>;
}

/** The API versions the fake serves under, as the SDKs name them. */
const VERSION_PREFIX = /^\/(v1|v1beta|v1beta1)\//;

export class FakeGemini {
  /** By name, `interactions/{id}` (served at `GET /v1beta/interactions/{id}`). */
  readonly interactions = new Map<string, FakeInteraction>();
  readonly webhooks = new Map<string, FakeWebhook>();
  /** Each ping delivery attempt: the webhook, the HTTP status Ratchet answered (0: no answer). */
  readonly pingAttempts: Array<{ webhook: string; status: number }> = [];
  /** How long a ping delivery is retried for, as Gemini retries non-2xx (24 h there). */
  pingRetryForMs = 30_000;
  private pingsInFlight = new Set<Promise<void>>();
  readonly batches = new Map<string, FakeBatch>();
  readonly operations = new Map<string, FakeOperation>();
  /** Agent Platform tuning jobs, by name (`projects/{p}/locations/{l}/tuningJobs/{id}`). */
  readonly tuningJobs = new Map<string, FakeTuningJob>();
  /** Resumable uploads begun (`uploadToFileSearchStore`): the session id → the store it uploads to. */
  private readonly uploads = new Map<string, string>();
  /** Each create request's body, by the name it created. */
  readonly created = new Map<string, Record<string, unknown>>();
  /** Page size of `GET /v1beta/batches` when the caller asks for none or more (Gemini's default is 50). */
  listPageSize = 50;
  listFault?: ListFault;
  /** Faults to answer with, by resource name; each is used once per request until cleared. */
  readonly faults = new Map<string, Fault>();
  /** Every resource name asked for, in order. */
  readonly requests: string[] = [];
  /** The API version of each request, in the same order. */
  readonly versions: string[] = [];
  /** The Agent Platform's express-mode key, and the access token `POST /token` hands out (Application Default Credentials). */
  platformApiKey = 'test-platform-key';
  readonly platformToken = `ya29.fake-${randomUUID()}`;
  /** Token exchanges made (`POST /token`). */
  tokenRequests = 0;
  /**
   * More Gemini API keys than the one the fake was made with. A resource in `owners` is visible to its key only
   * (another key is answered 404, as Gemini does), and listed to it only; one in `refusedKeys` is answered 403.
   */
  readonly otherKeys = new Set<string>();
  readonly owners = new Map<string, string>();
  readonly refusedKeys = new Set<string>();
  /**
   * Answer a refused key's 401 or 403 with that key quoted in the error's message, as some proxies in front of
   * Gemini (and some error pages) echo the request: whatever logs the answer's body then holds the key.
   */
  echoKeyInErrors = false;
  /** The key each Gemini API request came with, in the same order as `requests` (the Agent Platform's: ''). */
  readonly requestKeys: string[] = [];
  /** How long each Gemini API answer takes (a real provider's latency): 0, at once. */
  answerDelayMs = 0;
  /** Keys answered 429 with this Retry-After (seconds) for every request, as a key over its quota is. */
  readonly limitedKeys = new Map<string, number>();
  /** Held back answers: a request for a name here waits until `release(name)`. */
  private readonly held = new Map<string, Array<() => void>>();
  readonly holding = new Set<string>();
  private server?: Server;

  constructor(readonly apiKey = 'test-api-key') {}

  get baseUrl(): string {
    if (!this.server) throw new Error('fake Gemini not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Lets the held requests for `name` answer, with the state as it is when they do. */
  release(name: string): void {
    this.holding.delete(name);
    for (const resume of this.held.get(name) ?? []) resume();
    this.held.delete(name);
  }

  async start(): Promise<this> {
    this.server = createServer(async (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'POST' && url.pathname === '/token') return this.exchangeToken(req, res);
      if (req.method === 'POST' && url.pathname.startsWith('/upload')) return this.upload(req, res, url);
      const version = VERSION_PREFIX.exec(url.pathname)?.[1];
      if (!version) return json(res, 404, { error: { code: 404, message: `no API version in ${url.pathname}`, status: 'NOT_FOUND' } });
      let path = decodeURIComponent(url.pathname).slice(version.length + 2);
      const platform = path.startsWith('projects/');
      // The Agent Platform's Veo poll names the operation in its body; faults and holds are by that name.
      const fetchPredict = platform && req.method === 'POST' && path.endsWith(':fetchPredictOperation');
      const body = req.method === 'GET' ? '' : await text(req);
      if (fetchPredict) path = String((JSON.parse(body || '{}') as { operationName?: string }).operationName);
      this.requests.push(path);
      this.versions.push(version);
      const key = platform ? '' : String(req.headers['x-goog-api-key'] ?? '');
      this.requestKeys.push(key);
      const echoed = this.echoKeyInErrors ? ` (the key sent: ${key})` : '';
      if (!this.authorized(req, platform))
        return json(res, 401, { error: { code: 401, message: `API key not valid${echoed}`, status: 'UNAUTHENTICATED' } });
      if (this.refusedKeys.has(key))
        return json(res, 403, { error: { code: 403, message: `Permission denied on this key${echoed}`, status: 'PERMISSION_DENIED' } });
      const owner = this.owners.get(path);
      if (!platform && owner !== undefined && owner !== key)
        return json(res, 404, { error: { code: 404, message: `${path} not found`, status: 'NOT_FOUND' } });
      if (this.answerDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.answerDelayMs));
      const retryAfter = this.limitedKeys.get(key);
      if (retryAfter !== undefined) {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': String(retryAfter) });
        res.end(JSON.stringify({ error: { code: 429, message: 'Resource exhausted', status: 'RESOURCE_EXHAUSTED' } }));
        return;
      }
      if (this.holding.has(path)) await new Promise<void>((resume) => this.held.set(path, [...(this.held.get(path) ?? []), resume]));
      if (path === 'webhooks' || path.startsWith('webhooks/')) return this.webhooksApi(req, res, path, body, url);
      const fault = this.faults.get(path);
      if (fault === '429') return json(res, 429, { error: { code: 429, message: 'Resource exhausted', status: 'RESOURCE_EXHAUSTED' } });
      if (fault === '500') return json(res, 500, { error: { code: 500, message: 'Internal error', status: 'INTERNAL' } });
      if (fault === '404') return json(res, 404, { error: { code: 404, message: 'not found', status: 'NOT_FOUND' } });
      if (fault === 'malformed') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"name": "batches/');
        return;
      }
      if (fault === 'slow') await new Promise((resolve) => setTimeout(resolve, 15_000));
      if (req.method === 'POST' && !fetchPredict) return this.create(res, path, body);
      if (path === 'batches') return this.listBatches(url, res, key);
      if (this.batches.has(path)) return json(res, 200, platform ? this.predictionJobView(path) : this.batchView(path));
      const tuningJob = this.tuningJobs.get(path);
      if (tuningJob) return json(res, 200, { name: path, baseModel: 'gemini-2.5-flash', ...tuningJob });
      const interaction = this.interactions.get(path);
      if (interaction) {
        const id = path.slice(path.lastIndexOf('/') + 1);
        return json(res, 200, { id, object: 'interaction', created: '2026-11-30T09:00:00Z', ...interaction });
      }
      const operation = this.operations.get(path);
      if (operation) return json(res, 200, { name: path, ...operation });
      return json(res, 404, { error: { code: 404, message: `${path} not found`, status: 'NOT_FOUND' } });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  /** The Gemini API takes its key; the Agent Platform a bearer token from `/token`, or its express-mode key. */
  private authorized(req: IncomingMessage, platform: boolean): boolean {
    const key = req.headers['x-goog-api-key'];
    if (!platform) return key === this.apiKey || this.otherKeys.has(String(key)) || this.refusedKeys.has(String(key));
    return key === this.platformApiKey || req.headers.authorization === `Bearer ${this.platformToken}`;
  }

  /** An OAuth 2.0 token exchange (RFC 8693), as an external account's Application Default Credentials make it. */
  private async exchangeToken(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const form = new URLSearchParams(await text(req));
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:token-exchange' || !form.get('subject_token')) {
      return json(res, 400, { error: 'invalid_request' });
    }
    this.tokenRequests++;
    json(res, 200, {
      access_token: this.platformToken,
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      token_type: 'Bearer',
      expires_in: 3600,
    });
  }

  /** A batch prediction job as the Agent Platform answers it (the states are JOB_STATE_*). */
  private predictionJobView(name: string) {
    const { state, updateTime, createTime } = this.batches.get(name) as FakeBatch;
    return {
      name,
      displayName: name.slice(name.lastIndexOf('/') + 1),
      model: 'publishers/google/models/gemini-2.5-flash',
      state,
      createTime,
      updateTime,
      outputConfig: { gcsDestination: { outputUriPrefix: 'gs://ratchet-tests/out' } },
      ...(state === 'JOB_STATE_SUCCEEDED' && { outputInfo: { gcsOutputDirectory: `gs://ratchet-tests/out/${name.slice(-8)}` } }),
    };
  }

  /** Starts a job as Gemini does: a batch, a video generation or a background interaction, each at its first state. */
  private async create(res: ServerResponse, path: string, body: string): Promise<void> {
    const input = JSON.parse(body || '{}');
    const id = randomUUID().replace(/-/g, '').slice(0, 16);
    const now = new Date().toISOString();
    // A Gemini API model (`models/m`), or an Agent Platform one (`projects/p/locations/l/publishers/google/models/m`).
    const model = /^((?:projects\/[^/]+\/locations\/[^/]+\/publishers\/google\/)?models\/[^:]+):/.exec(path)?.[1];
    if (model && (path.endsWith(':batchGenerateContent') || path.endsWith(':asyncBatchEmbedContent'))) {
      const name = `batches/${id}`;
      this.batches.set(name, { state: 'BATCH_STATE_PENDING', createTime: now, updateTime: now });
      this.created.set(name, input);
      return json(res, 200, this.batchView(name));
    }
    if (model && path.endsWith(':predictLongRunning')) {
      const name = `${model}/operations/${id}`;
      this.operations.set(name, { done: false });
      this.created.set(name, input);
      return json(res, 200, { name });
    }
    const store = /^(fileSearchStores\/[^/:]+):importFile$/.exec(path)?.[1];
    if (store) {
      const name = `${store}/operations/${id}`;
      this.operations.set(name, { done: false });
      this.created.set(name, input);
      return json(res, 200, { name, done: false });
    }
    if (/^projects\/[^/]+\/locations\/[^/]+\/tuningJobs$/.test(path)) {
      const name = `${path}/${id}`;
      this.tuningJobs.set(name, { state: 'JOB_STATE_PENDING', createTime: now, updateTime: now });
      this.created.set(name, input);
      return json(res, 200, { name, state: 'JOB_STATE_PENDING', createTime: now });
    }
    if (path === 'interactions' || /^projects\/[^/]+\/locations\/[^/]+\/interactions$/.test(path)) {
      const name = `${path}/${id}`;
      this.interactions.set(name, { status: input.background ? 'in_progress' : 'completed', updated: now });
      this.created.set(name, input);
      return json(res, 200, { id, object: 'interaction', created: now, ...this.interactions.get(name) });
    }
    return json(res, 404, { error: { code: 404, message: `no create at ${path}`, status: 'NOT_FOUND' } });
  }

  /** A Gemini API batch: a long-running operation with the batch in its metadata (its counts too), a failure's error beside it. */
  private batchView(name: string) {
    const { error, ...batch } = this.batches.get(name) as FakeBatch;
    const done = /SUCCEEDED|FAILED|CANCELLED|EXPIRED/.test(batch.state);
    return {
      name,
      metadata: { '@type': 'type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch', name, ...batch },
      ...(done && { done }),
      ...(error && { error }),
    };
  }

  /**
   * `uploadToFileSearchStore`, as the SDK drives it: a resumable upload's start
   * (`POST /upload/{version}/fileSearchStores/{s}:uploadToFileSearchStore`,
   * answered with the session's URL), then its bytes with `upload, finalize`,
   * answered with the long-running operation that imports them.
   */
  private async upload(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    await text(req);
    if (req.headers['x-goog-api-key'] !== this.apiKey)
      return json(res, 401, { error: { code: 401, message: 'API key not valid', status: 'UNAUTHENTICATED' } });
    const store = /^\/upload\/v1\w*\/(fileSearchStores\/[^/:]+):uploadToFileSearchStore$/.exec(url.pathname)?.[1];
    if (store && req.headers['x-goog-upload-command'] === 'start') {
      const session = randomUUID();
      this.uploads.set(session, store);
      res.writeHead(200, { 'x-goog-upload-url': `${this.baseUrl}/upload-session/${session}`, 'x-goog-upload-status': 'active' }).end();
      return;
    }
    const session = /^\/upload-session\/([\w-]+)$/.exec(url.pathname)?.[1];
    const target = session && this.uploads.get(session);
    if (!target) return json(res, 404, { error: { code: 404, message: 'no such upload', status: 'NOT_FOUND' } });
    const name = `${target}/upload/operations/${randomUUID().replace(/-/g, '').slice(0, 16)}`;
    this.operations.set(name, { done: false });
    this.uploads.delete(session);
    res.writeHead(200, { 'content-type': 'application/json', 'x-goog-upload-status': 'final' }).end(JSON.stringify({ name, done: false }));
  }

  /** The key's batches (those another key owns left out), newest first, a page at a time (`pageToken` is the offset here). */
  private listBatches(url: URL, res: ServerResponse, key: string): void {
    const query = url.searchParams;
    const size = Math.min(Number(query.get('pageSize')) || this.listPageSize, this.listPageSize);
    const offset = Number(query.get('pageToken')) || 0;
    const all = [...this.batches.keys()].filter((name) => (this.owners.get(name) ?? key) === key).reverse();
    const page = all.slice(offset, offset + size).map((name) => this.batchView(name));
    const more = offset + size < all.length;
    const nextPageToken =
      this.listFault === 'token-loop' ? String(offset) : this.listFault === 'empty-token' ? '' : more ? String(offset + size) : undefined;
    json(res, 200, { operations: page, ...(nextPageToken !== undefined && { nextPageToken }) });
  }

  private async webhooksApi(req: IncomingMessage, res: ServerResponse, path: string, body: string, url: URL): Promise<void> {
    const input = req.method === 'GET' ? {} : JSON.parse(body || '{}');
    const [, id = '', action] = /^webhooks(?:\/([^:]+))?(?::(\w+))?$/.exec(path) ?? [];
    const now = new Date().toISOString();
    if (!id) {
      if (req.method === 'GET') return json(res, 200, { webhooks: [...this.webhooks.values()].map(view) }); // no next_page_token: the last page
      if (!input.uri || !Array.isArray(input.subscribed_events) || input.subscribed_events.length === 0) {
        return json(res, 400, { error: { code: 400, message: 'uri and subscribed_events are required', status: 'INVALID_ARGUMENT' } });
      }
      const secret = `whsec_${randomBytes(32).toString('base64')}`;
      const hook: FakeWebhook = {
        id: `wh_${randomUUID().slice(0, 8)}`,
        name: input.name,
        uri: input.uri,
        subscribed_events: input.subscribed_events,
        state: 'enabled',
        secrets: [{ secret }],
        create_time: now,
        update_time: now,
      };
      this.webhooks.set(hook.id, hook);
      return json(res, 200, { ...view(hook), new_signing_secret: secret });
    }
    const hook = this.webhooks.get(id);
    if (!hook) return json(res, 404, { error: { code: 404, message: `webhook ${id} not found`, status: 'NOT_FOUND' } });
    if (!action && req.method === 'GET') return json(res, 200, view(hook));
    if (!action && req.method === 'PATCH') {
      const mask = url.searchParams.get('update_mask')?.split(',') ?? Object.keys(input);
      for (const field of mask) if (field in input) Object.assign(hook, { [field]: input[field] });
      hook.update_time = now;
      return json(res, 200, view(hook));
    }
    if (action === 'rotateSigningSecret') {
      const secret = `whsec_${randomBytes(32).toString('base64')}`;
      const grace = input.revocation_behavior === 'revoke_previous_secrets_immediately' ? 0 : 24 * 3_600_000;
      const kept =
        grace === 0 ? [] : hook.secrets.map((s) => ({ secret: s.secret, expireTime: s.expireTime ?? new Date(Date.now() + grace) }));
      hook.secrets = [{ secret }, ...kept];
      return json(res, 200, { secret });
    }
    if (action === 'ping') {
      json(res, 200, {});
      const delivery = this.deliverPing(hook).finally(() => this.pingsInFlight.delete(delivery));
      this.pingsInFlight.add(delivery);
      return;
    }
    json(res, 400, { error: { code: 400, message: `unsupported ${req.method} ${path}`, status: 'INVALID_ARGUMENT' } });
  }

  /** Sends a signed ping to the webhook's URI, signed with every unexpired secret, until it is answered 2xx. */
  private async deliverPing(hook: FakeWebhook): Promise<void> {
    const id = `msg_${randomUUID()}`;
    const body = JSON.stringify({ type: 'webhook.ping', version: 'v1', timestamp: new Date().toISOString(), data: { id: hook.id } });
    const giveUpAt = Date.now() + this.pingRetryForMs;
    while (Date.now() < giveUpAt) {
      const timestamp = Math.floor(Date.now() / 1000);
      const signature = hook.secrets
        .filter((s) => !s.expireTime || s.expireTime.getTime() > Date.now())
        .map((s) => new Webhook(s.secret).sign(id, new Date(timestamp * 1000), body))
        .join(' ');
      let status = 0;
      try {
        const answer = await fetch(hook.uri, {
          method: 'POST',
          body,
          headers: {
            'content-type': 'application/json',
            'webhook-id': id,
            'webhook-timestamp': String(timestamp),
            'webhook-signature': signature,
          },
        });
        status = answer.status;
      } catch {}
      this.pingAttempts.push({ webhook: hook.id, status });
      if (status >= 200 && status < 300) return;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  async stop(): Promise<void> {
    await Promise.all(this.pingsInFlight);
    for (const name of [...this.holding]) this.release(name);
    this.server?.closeAllConnections();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** A webhook as Gemini answers it: the secrets only as truncated forms with their expiry. */
function view(hook: FakeWebhook) {
  const { secrets, ...rest } = hook;
  return {
    ...rest,
    signing_secrets: secrets.map((s) => ({
      truncated_secret: `${s.secret.slice(0, 10)}…`,
      ...(s.expireTime && { expire_time: s.expireTime.toISOString() }),
    })),
  };
}

async function text(req: IncomingMessage): Promise<string> {
  let body = '';
  for await (const chunk of req) body += chunk;
  return body;
}
