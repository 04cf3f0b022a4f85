/**
 * Polls Google with @google/genai: the adapter behind reconcile, for both
 * backends a job can live on.
 *
 * - The Gemini API (`batches/…`, `interactions/…`, `models/…/operations/…`,
 *   `operations/…`) with the API key, through the SDK's web build (fetch only:
 *   the Node build's google-auth-library and ws are not needed for a key).
 * - The Gemini Enterprise Agent Platform, formerly Vertex AI (`projects/{p}/
 *   locations/{l}/…`: batch prediction jobs, Veo operations, interactions),
 *   through the Node build in Agent Platform mode, with Application Default
 *   Credentials (or credentials handed over as JSON, or an express-mode key),
 *   for one project and location.
 *
 * Each SDK is loaded on the first poll that needs it: a run with nothing due
 * never reads it. The API version is set here, never left to the SDK's
 * default (3.x moved the Gemini API's to `v1`). Every call is retried at most
 * once (`batches.get` through `retryOptions`, the interactions and webhooks
 * clients through `maxRetries`): reconcile's per-operation backoff handles
 * longer outages. An answer larger than `maxAnswerBytes` (a video returned
 * inline) is refused before it is parsed.
 */
import type { GoogleGenAI } from '@google/genai/web';
import { backendOf, type OperationKind } from '../../core/lifecycle.ts';
import { isNameOfKind, platformScopeOf } from '../../core/names.ts';
import { redacted } from '../../core/redaction.ts';
import { retryAfterOf } from '../paced-keys.ts';
import { type KeyHealth, type PollAnswer, PollFailedError, type ProviderPoller, UnknownProviderStateError } from '../port.ts';
import {
  type BatchAnswer,
  batchAnswerOf,
  eventFromBatch,
  eventFromFileSearch,
  eventFromInteraction,
  eventFromOperation,
  eventFromTuning,
  type GeminiBatchLister,
  type InteractionAnswer,
  type OperationAnswer,
  type TuningAnswer,
} from './events.ts';

/** The Gemini API: an API key, or several by label. */
export interface GeminiApiAccess {
  /** The key a job that names no credential is polled with (with `keys`, the first of them). */
  apiKey: string;
  /**
   * GEMINI_API_KEYS: the keys by label, in order. A batch is visible only to the key that created it, so each
   * job is polled with the key its `credential` names; discovery lists each key's batches.
   */
  keys?: Array<{ label: string; apiKey: string }>;
  baseUrl?: string;
  /** Default `v1beta`: where batches, interactions and webhooks are served. */
  apiVersion?: string;
}

/** The Agent Platform: one project and location, and how to authenticate there. */
export interface AgentPlatformAccess {
  project: string;
  location: string;
  /** An express-mode API key; without it (and without `credentials`), Application Default Credentials. */
  apiKey?: string;
  /** A credentials JSON (a service account key, an external account configuration): in AWS, from Secrets Manager. */
  credentials?: Record<string, unknown>;
  baseUrl?: string;
  /** Default `v1beta1`, as the SDK's: batch prediction jobs, Veo operations and interactions are all served there. */
  apiVersion?: string;
}

export interface PollerOptions {
  gemini?: GeminiApiAccess;
  platform?: AgentPlatformAccess;
  /** One request's time limit (default 10 s). */
  timeoutMs?: number;
  /** The largest answer read (default 64 MiB): a larger one is refused before it is parsed. */
  maxAnswerBytes?: number;
  /** Where each key's last answer is noted (the console's and the health answer's); default: one of its own. */
  credentialHealth?: KeyHealth;
}

export const DEFAULT_GEMINI_API_VERSION = 'v1beta';
export const DEFAULT_PLATFORM_API_VERSION = 'v1beta1';
export const DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024;
/** One retry per call, as reconcile's own backoff takes over from there. */
const ATTEMPTS = 2;

type Sdk = Pick<typeof import('@google/genai/web'), 'GoogleGenAI' | 'GenerateVideosOperation' | 'ApiError'>;
interface Loaded {
  ai: GoogleGenAI;
  sdk: Sdk;
}

/** The answer was larger than the poller reads. */
class AnswerTooLargeError extends Error {
  override name = 'AnswerTooLargeError';
}

/** The part of the SDK's `ai.webhooks` the webhook health check needs (its wire shapes are snake_case). */
export interface WebhookLister {
  list(params?: { page_token?: string }): Promise<{
    webhooks?: Array<{ id?: string; uri?: string; state?: string }>;
    next_page_token?: string;
  }>;
}

/** Where no one asked for the keys' answers: noted nowhere. */
const UNNOTED: KeyHealth = { accepted: () => {}, refused: () => {} };

export class GenAiPoller implements Pick<ProviderPoller, 'poll'>, GeminiBatchLister {
  /** One SDK client per Gemini API key, by label ('' for a single GEMINI_API_KEY). */
  private readonly gemini = new Map<string, Promise<Loaded>>();
  private platform?: Promise<Loaded>;
  /** How Gemini last answered each key: the console and the health answer show a refused one. */
  readonly credentials: KeyHealth;

  constructor(private readonly options: PollerOptions) {
    this.credentials = options.credentialHealth ?? UNNOTED;
  }

  /** The labels of the Gemini API keys (none for a single GEMINI_API_KEY). */
  get labels(): string[] {
    return this.options.gemini?.keys?.map((k) => k.label) ?? [];
  }

  /** Which backends this poller can reach. */
  get backends(): { geminiApi: boolean; agentPlatform: boolean } {
    return { geminiApi: Boolean(this.options.gemini), agentPlatform: Boolean(this.options.platform) };
  }

  /**
   * The Retry-After of each key's last 429 (the SDK's errors carry no headers): a 429 poll says it, and reconcile
   * holds that key alone that long (app/reconcile/held-keys.ts).
   */
  private readonly retryAfter = new Map<string, number>();

  private httpOptions(baseUrl: string | undefined, apiVersion: string, label?: string) {
    const capped = cappedFetch(this.options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES);
    const fetch: typeof globalThis.fetch =
      label === undefined
        ? capped
        : async (input, init) => {
            const response = await capped(input, init);
            const seconds = response.status === 429 ? retryAfterOf(response.headers) : undefined;
            if (seconds !== undefined) this.retryAfter.set(label, seconds);
            return response;
          };
    return {
      ...(baseUrl && { baseUrl }),
      apiVersion,
      timeout: this.options.timeoutMs ?? 10_000,
      retryOptions: { attempts: ATTEMPTS, initialDelay: 0.2, maxDelay: 1 },
      fetch,
    };
  }

  /** The key labelled `label` (none: the default key), or PollFailedError naming the label that has none here. */
  private keyOf(label: string | undefined): { label: string; apiKey: string } {
    const access = this.options.gemini;
    if (!access) throw new PollFailedError('the Gemini API is not configured here (neither GEMINI_API_KEY nor GEMINI_API_KEYS is set)');
    if (label === undefined) return access.keys?.[0] ?? { label: '', apiKey: access.apiKey };
    const key = access.keys?.find((k) => k.label === label);
    if (!key) throw new PollFailedError(`no Gemini API key labelled ${JSON.stringify(label)} here (GEMINI_API_KEYS)`);
    return key;
  }

  private geminiApi(label?: string): Promise<Loaded> {
    const access = this.options.gemini as GeminiApiAccess;
    const key = this.keyOf(label);
    let loaded = this.gemini.get(key.label);
    if (!loaded) {
      loaded = import('@google/genai/web').then((sdk) => ({
        sdk,
        ai: new sdk.GoogleGenAI({
          apiKey: key.apiKey,
          httpOptions: this.httpOptions(access.baseUrl, access.apiVersion ?? DEFAULT_GEMINI_API_VERSION, key.label),
        }),
      }));
      this.gemini.set(key.label, loaded);
    }
    return loaded;
  }

  private agentPlatform(): Promise<Loaded> {
    const access = this.options.platform;
    if (!access) {
      throw new PollFailedError('the Agent Platform is not configured here (GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION are not set)');
    }
    // The Node build: Application Default Credentials need google-auth-library.
    this.platform ??= import('@google/genai/node').then((sdk) => ({
      sdk: sdk as unknown as Sdk,
      ai: new sdk.GoogleGenAI({
        vertexai: true,
        project: access.project,
        location: access.location,
        ...(access.apiKey && { apiKey: access.apiKey }),
        // The project is known: without it, google-auth-library asks Cloud Resource Manager for one first (an external
        // account's first request failed on that lookup where the identity may not read the project).
        googleAuthOptions: { projectId: access.project, ...(access.credentials && { credentials: access.credentials }) },
        httpOptions: this.httpOptions(access.baseUrl, access.apiVersion ?? DEFAULT_PLATFORM_API_VERSION),
      }) as unknown as GoogleGenAI,
    }));
    return this.platform;
  }

  /** Gemini's webhooks API, for the health check: one retry per page, as every other call. */
  readonly webhooks: WebhookLister = {
    list: async (params) => {
      const { ai } = await this.geminiApi();
      const list = ai.webhooks.list.bind(ai.webhooks) as unknown as (
        params: unknown,
        options: { maxRetries: number },
      ) => ReturnType<WebhookLister['list']>;
      return list(params ?? {}, { maxRetries: ATTEMPTS - 1 });
    },
  };

  /** One page of a key's batches (for discovery), read as the SDK answers it; the pager's own loop is not used. */
  async listBatches({
    pageSize,
    pageToken,
    credential,
  }: {
    pageSize: number;
    pageToken?: string;
    credential?: string;
  }): ReturnType<GeminiBatchLister['listBatches']> {
    const { ai, sdk } = await this.geminiApi(credential);
    const pager = await this.noted(credential, sdk, () => ai.batches.list({ config: { pageSize, ...(pageToken && { pageToken }) } }));
    const next = (pager.params as { config?: { pageToken?: string } }).config?.pageToken;
    return {
      batches: pager.page as Array<BatchAnswer & { name?: string; createTime?: string }>,
      ...(next !== undefined && { nextPageToken: next }),
    };
  }

  /** `call`, its answer noting the key as accepted, a 401 or 403 as refused (by label: never the key). */
  private async noted<T>(label: string | undefined, sdk: Sdk, call: () => Promise<T>): Promise<T> {
    const shown = label ?? this.options.gemini?.keys?.[0]?.label ?? '';
    try {
      const answer = await call();
      this.credentials.accepted(shown);
      return answer;
    } catch (error) {
      const status = error instanceof sdk.ApiError ? error.status : (error as { status?: unknown }).status;
      if (status === 401 || status === 403) this.credentials.refused(shown, status);
      throw error;
    }
  }

  async poll({ name, kind, credential }: { name: string; kind: OperationKind; credential?: string }): Promise<PollAnswer> {
    // The edge validates every name; this guards records written before it did. A credential never goes to another path.
    if (!isNameOfKind(name, kind)) return { kind: 'refused', reason: `not a well-formed ${kind} name`, note: 'invalid-name' };
    const platform = backendOf(kind) === 'agent-platform';
    const scope = platformScopeOf(name);
    const access = this.options.platform;
    if (platform && access && (scope?.project !== access.project || scope?.location !== access.location)) {
      return {
        kind: 'refused',
        reason: `not in this deployment's Agent Platform project and location (${access.project}/${access.location})`,
        note: 'other-project',
      };
    }
    const { ai, sdk } = await (platform ? this.agentPlatform() : this.geminiApi(credential));
    const id = name.slice(name.lastIndexOf('/') + 1);
    try {
      const read = () => this.eventOf(ai, sdk, name, kind, id);
      return { kind: 'event', event: platform ? await read() : await this.noted(credential, sdk, read) };
    } catch (error) {
      if (error instanceof UnknownProviderStateError) return { kind: 'unknown-state', raw: error.raw };
      const tooLarge = causeOf(error, AnswerTooLargeError);
      if (tooLarge) throw new PollFailedError(tooLarge.message);
      // ApiError from the classic API, the interactions client's own error classes: both carry the HTTP status.
      const status = error instanceof sdk.ApiError ? error.status : (error as { status?: unknown }).status;
      if (status === 404) return { kind: 'not-found' };
      const refusedKey =
        !platform && (status === 401 || status === 403) && credential ? ` (the key labelled ${JSON.stringify(credential)})` : '';
      const retryAfter = status === 429 && !platform ? this.retryAfter.get(this.keyOf(credential).label) : undefined;
      if (typeof status === 'number')
        throw new PollFailedError(`${platform ? 'the Agent Platform' : 'Gemini'} answered ${status}${refusedKey}`, status, retryAfter);
      // Kept in the record's polling note, shown by the API and the console: redacted as a log line is.
      throw new PollFailedError(redacted((error as Error).message));
    }
  }

  /** One poll's answer as an event, by the job's kind. */
  private async eventOf(ai: GoogleGenAI, sdk: Sdk, name: string, kind: OperationKind, id: string) {
    // A Gemini API batch read as Gemini answers it (`batches.get` drops its batchStats and error).
    if (kind === 'batch') return eventFromBatch(name, kind, batchAnswerOf(await getRaw(ai, name)));
    if (kind === 'platform-batch') return eventFromBatch(name, kind, await ai.batches.get({ name }));
    if (kind === 'file-search') return eventFromFileSearch(name, await getRaw(ai, name));
    if (kind === 'platform-tuning') return eventFromTuning(name, (await ai.tunings.get({ name })) as TuningAnswer);
    if (kind === 'interaction' || kind === 'platform-interaction') {
      const get = ai.interactions.get.bind(ai.interactions) as unknown as (
        id: string,
        params: object,
        options: { maxRetries: number },
      ) => Promise<InteractionAnswer>;
      return eventFromInteraction(name, kind, await get(id, {}, { maxRetries: ATTEMPTS - 1 }));
    }
    // The SDK wants its own operation class with `name` set; a plain {name} fails. On the Agent Platform,
    // getVideosOperation asks `:fetchPredictOperation` of the model.
    const operation = new sdk.GenerateVideosOperation();
    operation.name = name;
    const answer = kind === 'operation' ? await ai.operations.get({ operation }) : await ai.operations.getVideosOperation({ operation });
    return eventFromOperation(name, kind, answer as OperationAnswer);
  }
}

/**
 * `GET {name}` through the SDK's operations client, the answer as Gemini sent
 * it: the SDK builds whatever its `operation` argument's `_fromAPIResponse`
 * makes of the answer (its Operation interface), and this one keeps it whole.
 */
async function getRaw(ai: GoogleGenAI, name: string): Promise<RawOperation> {
  return (await ai.operations.get({ operation: new RawOperation(name) as never })) as unknown as RawOperation;
}

class RawOperation {
  [field: string]: unknown;
  metadata?: Record<string, unknown>;
  error?: { code?: number; message?: string; status?: string };
  response?: Record<string, unknown>;
  done?: boolean;
  constructor(public name: string) {}
  _fromAPIResponse({ apiResponse }: { apiResponse: Record<string, unknown> }): RawOperation {
    return Object.assign(new RawOperation(this.name), apiResponse);
  }
}

/** `error` or the first of its causes that is an `type` (the SDKs wrap what fetch throws). */
function causeOf<T extends Error>(error: unknown, type: new (...args: never[]) => T): T | undefined {
  for (let at = error, depth = 0; at instanceof Error && depth < 5; at = at.cause, depth++) if (at instanceof type) return at;
  return undefined;
}

/**
 * fetch, refusing an answer over `maxBytes` before the SDK parses it: by its
 * Content-Length when it has one, else while it is read.
 */
export function cappedFetch(maxBytes: number): typeof fetch {
  const refuse = () =>
    new AnswerTooLargeError(
      `the answer is larger than ${Math.round(maxBytes / 1_048_576)} MiB (a video returned inline?): ` +
        'create such jobs with response_format delivery "uri", or raise GEMINI_MAX_ANSWER_MB',
    );
  return async (input, init) => {
    const response = await fetch(input, init);
    const length = Number(response.headers.get('content-length'));
    if (length > maxBytes) {
      await response.body?.cancel();
      throw refuse();
    }
    if (!response.body || length > 0) return response;
    const chunks: Uint8Array[] = [];
    let size = 0;
    for await (const chunk of response.body as AsyncIterable<Uint8Array>) {
      size += chunk.byteLength;
      if (size > maxBytes) throw refuse();
      chunks.push(chunk);
    }
    return new Response(Buffer.concat(chunks), { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
