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
import {
  type BatchAnswer,
  eventFromBatch,
  eventFromInteraction,
  eventFromOperation,
  type InteractionAnswer,
  type OperationAnswer,
  UnknownProviderStateError,
} from '../../core/gemini-poll.ts';
import { backendOf, type OperationKind } from '../../core/lifecycle.ts';
import { isNameOfKind, platformScopeOf } from '../../core/names.ts';
import { agentPlatformOf, type Config, ConfigError } from '../config.ts';
import type { BatchLister } from './discovery.ts';
import { type GeminiPoller, type PollAnswer, PollFailedError } from './poller.ts';
import type { WebhookLister } from './webhook-health.ts';

/** The Gemini API: an API key. */
export interface GeminiApiAccess {
  apiKey: string;
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

/** The secret settings the poller needs, however the caller reads them (the variable itself, or Secrets Manager in AWS). */
export type PollerSecret = 'GEMINI_API_KEY' | 'AGENT_PLATFORM_API_KEY' | 'AGENT_PLATFORM_CREDENTIALS';

/**
 * What reconcile polls with, from the configuration: the Gemini API when it has a
 * key, the Agent Platform when a project and location are set. Undefined when
 * neither is: nothing can be polled. A credentials JSON that does not parse is a
 * ConfigError naming the variable (never its value).
 */
export async function pollerOptionsOf(
  config: Config,
  secret: (name: PollerSecret) => Promise<string | undefined>,
): Promise<PollerOptions | undefined> {
  const apiKey = await secret('GEMINI_API_KEY');
  const scope = agentPlatformOf(config);
  const options: PollerOptions = {
    maxAnswerBytes: config.GEMINI_MAX_ANSWER_MB * 1_048_576,
    ...(apiKey && { gemini: { apiKey, baseUrl: config.GEMINI_BASE_URL, apiVersion: config.GEMINI_API_VERSION } }),
  };
  if (scope) {
    const platformKey = await secret('AGENT_PLATFORM_API_KEY');
    const credentials = await secret('AGENT_PLATFORM_CREDENTIALS');
    options.platform = {
      ...scope,
      ...(platformKey && { apiKey: platformKey }),
      ...(credentials && { credentials: credentialsOf(credentials) }),
      baseUrl: config.AGENT_PLATFORM_BASE_URL,
      apiVersion: config.AGENT_PLATFORM_API_VERSION,
    };
  }
  return options.gemini || options.platform ? options : undefined;
}

function credentialsOf(json: string): Record<string, unknown> {
  try {
    const parsed = JSON.parse(json) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {}
  throw new ConfigError(
    'AGENT_PLATFORM_CREDENTIALS is not a credentials JSON object (a service account key or an external account configuration)',
  );
}

/** The answer was larger than the poller reads. */
class AnswerTooLargeError extends Error {
  override name = 'AnswerTooLargeError';
}

export class GenAiPoller implements GeminiPoller, BatchLister {
  private gemini?: Promise<Loaded>;
  private platform?: Promise<Loaded>;

  constructor(private readonly options: PollerOptions) {}

  /** Which backends this poller can reach. */
  get backends(): { geminiApi: boolean; agentPlatform: boolean } {
    return { geminiApi: Boolean(this.options.gemini), agentPlatform: Boolean(this.options.platform) };
  }

  private httpOptions(baseUrl: string | undefined, apiVersion: string) {
    return {
      ...(baseUrl && { baseUrl }),
      apiVersion,
      timeout: this.options.timeoutMs ?? 10_000,
      retryOptions: { attempts: ATTEMPTS, initialDelay: 0.2, maxDelay: 1 },
      fetch: cappedFetch(this.options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES),
    };
  }

  private geminiApi(): Promise<Loaded> {
    const access = this.options.gemini;
    if (!access) throw new PollFailedError('the Gemini API is not configured here (GEMINI_API_KEY is not set)');
    this.gemini ??= import('@google/genai/web').then((sdk) => ({
      sdk,
      ai: new sdk.GoogleGenAI({
        apiKey: access.apiKey,
        httpOptions: this.httpOptions(access.baseUrl, access.apiVersion ?? DEFAULT_GEMINI_API_VERSION),
      }),
    }));
    return this.gemini;
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

  /** One page of the key's batches (for discovery), read as the SDK answers it; the pager's own loop is not used. */
  async listBatches({ pageSize, pageToken }: { pageSize: number; pageToken?: string }): ReturnType<BatchLister['listBatches']> {
    const { ai } = await this.geminiApi();
    const pager = await ai.batches.list({ config: { pageSize, ...(pageToken && { pageToken }) } });
    const next = (pager.params as { config?: { pageToken?: string } }).config?.pageToken;
    return {
      batches: pager.page as Array<BatchAnswer & { name?: string; createTime?: string }>,
      ...(next !== undefined && { nextPageToken: next }),
    };
  }

  async poll({ name, kind }: { name: string; kind: OperationKind }): Promise<PollAnswer> {
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
    const { ai, sdk } = await (platform ? this.agentPlatform() : this.geminiApi());
    const id = name.slice(name.lastIndexOf('/') + 1);
    try {
      if (kind === 'batch' || kind === 'platform-batch')
        return { kind: 'event', event: eventFromBatch(name, kind, await ai.batches.get({ name })) };
      if (kind === 'interaction' || kind === 'platform-interaction') {
        const get = ai.interactions.get.bind(ai.interactions) as unknown as (
          id: string,
          params: object,
          options: { maxRetries: number },
        ) => Promise<InteractionAnswer>;
        return { kind: 'event', event: eventFromInteraction(name, kind, await get(id, {}, { maxRetries: ATTEMPTS - 1 })) };
      }
      // The SDK wants its own operation class with `name` set; a plain {name} fails. On the Agent Platform,
      // getVideosOperation asks `:fetchPredictOperation` of the model.
      const operation = new sdk.GenerateVideosOperation();
      operation.name = name;
      const answer = kind === 'operation' ? await ai.operations.get({ operation }) : await ai.operations.getVideosOperation({ operation });
      return { kind: 'event', event: eventFromOperation(name, kind, answer as OperationAnswer) };
    } catch (error) {
      if (error instanceof UnknownProviderStateError) throw new PollFailedError(error.message, undefined, error.raw);
      const tooLarge = causeOf(error, AnswerTooLargeError);
      if (tooLarge) throw new PollFailedError(tooLarge.message);
      // ApiError from the classic API, the interactions client's own error classes: both carry the HTTP status.
      const status = error instanceof sdk.ApiError ? error.status : (error as { status?: unknown }).status;
      if (status === 404) return { kind: 'not-found' };
      if (typeof status === 'number') throw new PollFailedError(`${platform ? 'the Agent Platform' : 'Gemini'} answered ${status}`, status);
      throw new PollFailedError((error as Error).message);
    }
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
