/**
 * Polls OpenAI with the official `openai` SDK: the adapter behind reconcile for
 * OpenAI's five kinds of job, and for batches on an Azure OpenAI resource
 * (the SDK's AzureOpenAI client: the same objects, an `api-key` header and an
 * `api-version`).
 *
 * The SDK is loaded on the first poll: a run with nothing of OpenAI's to poll
 * never reads it. One client per key (a job is visible to the project whose
 * key created it, so each job is polled with the key its `credential` names).
 * Each call is retried at most once by the SDK (reconcile's backoff takes over
 * from there) within `timeoutMs`, except a 429: the key is held back as long as
 * OpenAI asked, alone (paced-keys.ts). A name that is not its kind's is refused
 * before anything is sent.
 */
import type OpenAI from 'openai';
import type { OperationKind } from '../../core/lifecycle.ts';
import { isNameOfKind } from '../../core/names.ts';
import { timeOfUnixSeconds } from '../answers.ts';
import { type CallFailure, fetchHoldingOn429, PacedKeys, retryAfterOf } from '../paced-keys.ts';
import {
  type KeyHealth,
  type LabelledKey,
  type ListedBatch,
  type PollAnswer,
  PollFailedError,
  type PollTarget,
  type ProviderPoller,
  UnknownProviderStateError,
} from '../port.ts';
import {
  azureOpenAIName,
  eventFromOpenAI,
  idsOfAzureOpenAIName,
  idsOfOpenAIName,
  type OpenAIJobAnswer,
  type OpenAIKind,
  type OpenAIObjectKind,
  openAIName,
} from './events.ts';

export interface OpenAIPollerOptions {
  /** OPENAI_API_KEY (label '') or OPENAI_API_KEYS, in order: a job that names no credential is polled with the first. */
  keys: LabelledKey[];
  /** OPENAI_BASE_URL; default the SDK's (`https://api.openai.com/v1`). */
  baseUrl?: string;
  /** One request's time limit, in milliseconds. @default 10_000 */
  timeoutMs?: number;
  /** Where each key's last answer is noted, by label. */
  keyHealth?: KeyHealth;
  /**
   * Each key's pace. @default 5: a small share of OpenAI's published request limits (500 a minute and up, per
   * organisation, at the lowest paid tier), so that polling leaves the key's own work its room.
   */
  requestsPerSecond?: number;
  /** Milliseconds since the epoch, for the 429 holds (default Date.now). */
  clock?: () => number;
}

export interface AzureOpenAIPollerOptions extends Omit<OpenAIPollerOptions, 'keys' | 'baseUrl'> {
  /** AZURE_OPENAI_ENDPOINT: `https://{resource}.openai.azure.com/`. */
  endpoint: string;
  /** AZURE_OPENAI_API_KEY. */
  apiKey: string;
  /** The resource's name in job names (`azure-openai/{resource}/batches/{id}`); default the endpoint's first host label. */
  resource?: string;
  /** @default '2025-04-01-preview' (the batch API's). */
  apiVersion?: string;
  /** The whole base URL instead of `{endpoint}/openai` (a proxy, a test's fake). */
  baseUrl?: string;
}

export const DEFAULT_OPENAI_REQUESTS_PER_SECOND = 5;
export const DEFAULT_AZURE_OPENAI_API_VERSION = '2025-04-01-preview';
const DEFAULT_TIMEOUT_MS = 10_000;
/** One retry per call: reconcile's own backoff takes over from there. */
const MAX_RETRIES = 1;

type Sdk = typeof import('openai');

const OPENAI_KINDS: readonly OperationKind[] = ['openai-batch', 'openai-response', 'openai-video', 'openai-fine-tuning', 'openai-eval-run'];

/** Where the poller's clients point: OpenAI, or one Azure OpenAI resource. */
type Site =
  | { provider: 'OpenAI'; baseUrl?: string }
  | { provider: 'Azure OpenAI'; endpoint: string; resource: string; apiVersion: string; baseUrl?: string };

export class OpenAIPoller implements ProviderPoller {
  private sdk?: Promise<Sdk>;
  /** One client per key label. */
  private readonly clients = new Map<string, Promise<OpenAI>>();
  private readonly keys: PacedKeys;
  private readonly site: Site;
  private readonly timeoutMs: number;

  constructor(options: OpenAIPollerOptions, site?: Site) {
    this.site = site ?? { provider: 'OpenAI', ...(options.baseUrl && { baseUrl: options.baseUrl }) };
    this.keys = new PacedKeys(options.keys, {
      provider: this.site.provider,
      requestsPerSecond: options.requestsPerSecond ?? DEFAULT_OPENAI_REQUESTS_PER_SECOND,
      ...(options.keyHealth && { keyHealth: options.keyHealth }),
      ...(options.clock && { clock: options.clock }),
    });
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  }

  get labels(): string[] {
    return this.keys.labels;
  }

  /** The kinds this poller polls. */
  get kinds(): readonly OperationKind[] {
    return this.site.provider === 'OpenAI' ? OPENAI_KINDS : ['azure-openai-batch'];
  }

  async poll({ name, kind, credential }: PollTarget): Promise<PollAnswer> {
    // The edge validates every name; this guards records written before it did. A key never goes to another path.
    if (!this.kinds.includes(kind) || !isNameOfKind(name, kind))
      return { kind: 'refused', reason: `not a well-formed ${kind} name for ${this.site.provider}`, note: 'invalid-name' };
    if (this.site.provider === 'Azure OpenAI' && idsOfAzureOpenAIName(name).resource !== this.site.resource)
      return { kind: 'refused', reason: `not on this deployment's Azure OpenAI resource (${this.site.resource})`, note: 'other-project' };
    let answer: OpenAIJobAnswer;
    try {
      answer = await this.call(credential, (client) => retrieve(client, kind as OpenAIObjectKind, name));
    } catch (error) {
      if (failureOf(await this.loadSdk(), error).status === 404) return { kind: 'not-found' };
      throw await this.failed(error, credential);
    }
    try {
      return { kind: 'event', event: eventFromOpenAI(kind as OpenAIObjectKind, name, answer) };
    } catch (error) {
      if (error instanceof UnknownProviderStateError) return { kind: 'unknown-state', raw: error.raw };
      throw new PollFailedError(`${this.site.provider} answered what Ratchet cannot read for ${name}: ${(error as Error).message}`);
    }
  }

  /** Discovery: one page of the key's batches, newest first; `pageToken` is the last batch id of the page before. */
  async listBatches({ pageSize, pageToken, credential }: { pageSize: number; pageToken?: string; credential?: string }) {
    let page: { data: OpenAI.Batches.Batch[]; has_more: boolean };
    try {
      page = await this.call(credential, (client) => client.batches.list({ limit: pageSize, ...(pageToken && { after: pageToken }) }));
    } catch (error) {
      throw await this.failed(error, credential);
    }
    const site = this.site;
    const kind = site.provider === 'OpenAI' ? 'openai-batch' : 'azure-openai-batch';
    const batches: ListedBatch[] = [];
    for (const batch of page.data) {
      const name = site.provider === 'OpenAI' ? openAIName('openai-batch', batch.id) : azureOpenAIName(site.resource, batch.id);
      // A batch Ratchet cannot name is none it can track: the page goes on without it.
      if (!isNameOfKind(name, kind)) continue;
      const createTime = timeOfUnixSeconds(batch.created_at);
      batches.push({ name, ...(createTime && { createTime }), event: () => eventFromOpenAI(kind, name, batch) });
    }
    const last = page.data.at(-1)?.id;
    return { batches, ...(page.has_more && last && { nextPageToken: last }) };
  }

  /** `request` with the client of the key labelled `label`, paced and held back as paced-keys.ts says. */
  private async call<T>(label: string | undefined, request: (client: OpenAI) => Promise<T>): Promise<T> {
    const sdk = await this.loadSdk();
    return this.keys.run(
      label,
      async (key) => request(await this.clientOf(key)),
      (error) => failureOf(sdk, error),
    );
  }

  /** PollFailedError for what is not an answer: OpenAI's status (a refused key named by its label), or the cause. */
  private async failed(error: unknown, label: string | undefined): Promise<Error> {
    if (error instanceof PollFailedError) return error;
    const sdk = await this.loadSdk();
    const { status, retryAfterSeconds } = failureOf(sdk, error);
    if (status === undefined) return new PollFailedError(`${this.site.provider}: ${(error as Error).message}`);
    const code = error instanceof sdk.APIError && error.code ? ` (${error.code})` : '';
    const refused = status === 401 || status === 403 ? ` to the key labelled ${JSON.stringify(this.keys.keyOf(label).label)}` : '';
    return new PollFailedError(`${this.site.provider} answered ${status}${code}${refused}`, status, retryAfterSeconds);
  }

  private loadSdk(): Promise<Sdk> {
    this.sdk ??= import('openai');
    return this.sdk;
  }

  private clientOf(key: LabelledKey): Promise<OpenAI> {
    let client = this.clients.get(key.label);
    if (!client) {
      const common = { maxRetries: MAX_RETRIES, timeout: this.timeoutMs, fetch: fetchHoldingOn429 };
      const site = this.site;
      client = this.loadSdk().then((sdk) =>
        site.provider === 'OpenAI'
          ? new sdk.OpenAI({ apiKey: key.apiKey, ...(site.baseUrl && { baseURL: site.baseUrl }), ...common })
          : new sdk.AzureOpenAI({
              apiKey: key.apiKey,
              apiVersion: site.apiVersion,
              // Either a whole base URL or the endpoint; null keeps the SDK from reading OPENAI_BASE_URL (OpenAI's) instead.
              ...(site.baseUrl ? { baseURL: site.baseUrl } : { endpoint: site.endpoint, baseURL: null }),
              ...common,
            }),
      );
      this.clients.set(key.label, client);
    }
    return client;
  }
}

/** Polls the batches of one Azure OpenAI resource (`azure-openai/{resource}/batches/{id}`) with its key. */
export class AzureOpenAIPoller extends OpenAIPoller {
  constructor(options: AzureOpenAIPollerOptions) {
    const { endpoint, apiKey, resource, apiVersion, baseUrl, ...rest } = options;
    super(
      { ...rest, keys: [{ label: '', apiKey }] },
      {
        provider: 'Azure OpenAI',
        endpoint,
        resource: resource ?? resourceOf(endpoint),
        apiVersion: apiVersion ?? DEFAULT_AZURE_OPENAI_API_VERSION,
        ...(baseUrl && { baseUrl }),
      },
    );
  }
}

/** `https://{resource}.openai.azure.com/` -> `{resource}`. */
function resourceOf(endpoint: string): string {
  const host = URL.canParse(endpoint) ? new URL(endpoint).hostname : '';
  const resource = host.split('.')[0];
  if (!resource) throw new Error(`not an Azure OpenAI endpoint: ${JSON.stringify(endpoint)} (https://{resource}.openai.azure.com/)`);
  return resource;
}

/** GET the job by its id, per kind. */
async function retrieve(client: OpenAI, kind: OpenAIObjectKind, name: string): Promise<OpenAIJobAnswer> {
  const { id, evalId } = kind === 'azure-openai-batch' ? { ...idsOfAzureOpenAIName(name), evalId: undefined } : idsOfOpenAIName(name);
  switch (kind as OpenAIKind | 'azure-openai-batch') {
    case 'openai-batch':
    case 'azure-openai-batch':
      return client.batches.retrieve(id);
    case 'openai-response':
      return client.responses.retrieve(id);
    case 'openai-video':
      return client.videos.retrieve(id);
    case 'openai-fine-tuning':
      return client.fineTuning.jobs.retrieve(id);
    case 'openai-eval-run':
      return client.evals.runs.retrieve(id, { eval_id: evalId as string });
  }
}

/** What the SDK's error says: its HTTP status, and a 429's wait. */
function failureOf(sdk: Sdk, error: unknown): CallFailure {
  if (!(error instanceof sdk.APIError) || typeof error.status !== 'number') return {};
  const retryAfterSeconds = error.status === 429 ? retryAfterOf(error.headers) : undefined;
  return { status: error.status, ...(retryAfterSeconds !== undefined && { retryAfterSeconds }) };
}
