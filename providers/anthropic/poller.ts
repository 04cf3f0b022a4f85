/**
 * Polls Anthropic's Message Batches with the official `@anthropic-ai/sdk`:
 * the adapter behind reconcile for `anthropic-batch`, and discovery's listing
 * of the batches a key created.
 *
 * The SDK is loaded on the first poll. One client per key (a batch is visible
 * to the workspace whose key created it, so each is polled with the key its
 * `credential` names). Each call is retried at most once by the SDK within
 * `timeoutMs`, except a 429: the key is held back as long as Anthropic asked,
 * alone (paced-keys.ts). A name that is not a Message Batch's is refused before
 * anything is sent.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { isNameOfKind } from '../../core/names.ts';
import { timeOf } from '../answers.ts';
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
import { type AnthropicBatchAnswer, anthropicName, eventFromAnthropic } from './events.ts';

export interface AnthropicPollerOptions {
  /** ANTHROPIC_API_KEY (label '') or ANTHROPIC_API_KEYS, in order: a job that names no credential is polled with the first. */
  keys: LabelledKey[];
  /** ANTHROPIC_BASE_URL; default the SDK's (`https://api.anthropic.com`). */
  baseUrl?: string;
  /** One request's time limit, in milliseconds. @default 10_000 */
  timeoutMs?: number;
  /** Where each key's last answer is noted, by label. */
  keyHealth?: KeyHealth;
  /** Each key's pace. @default 10 (the Message Batches API's limits are per organisation; a 429 holds the key back). */
  requestsPerSecond?: number;
  /** Milliseconds since the epoch, for the 429 holds (default Date.now). */
  clock?: () => number;
}

export const DEFAULT_ANTHROPIC_REQUESTS_PER_SECOND = 10;
const DEFAULT_TIMEOUT_MS = 10_000;
/** One retry per call: reconcile's own backoff takes over from there. */
const MAX_RETRIES = 1;

type Sdk = typeof import('@anthropic-ai/sdk');

export class AnthropicPoller implements ProviderPoller {
  private sdk?: Promise<Sdk>;
  /** One client per key label. */
  private readonly clients = new Map<string, Promise<Anthropic>>();
  private readonly keys: PacedKeys;

  constructor(private readonly options: AnthropicPollerOptions) {
    this.keys = new PacedKeys(options.keys, {
      provider: 'Anthropic',
      requestsPerSecond: options.requestsPerSecond ?? DEFAULT_ANTHROPIC_REQUESTS_PER_SECOND,
      ...(options.keyHealth && { keyHealth: options.keyHealth }),
      ...(options.clock && { clock: options.clock }),
    });
  }

  get labels(): string[] {
    return this.keys.labels;
  }

  async poll({ name, kind, credential }: PollTarget): Promise<PollAnswer> {
    // The edge validates every name; this guards records written before it did. A key never goes to another path.
    if (kind !== 'anthropic-batch' || !isNameOfKind(name, kind))
      return { kind: 'refused', reason: `not a well-formed ${kind} name for Anthropic`, note: 'invalid-name' };
    const id = name.slice(name.lastIndexOf('/') + 1);
    let batch: AnthropicBatchAnswer;
    try {
      batch = await this.call(credential, (client) => client.messages.batches.retrieve(id));
    } catch (error) {
      if ((await this.failureOf(error)).status === 404) return { kind: 'not-found' };
      throw await this.failed(error, credential);
    }
    try {
      return { kind: 'event', event: eventFromAnthropic(name, batch) };
    } catch (error) {
      if (error instanceof UnknownProviderStateError) return { kind: 'unknown-state', raw: error.raw };
      throw new PollFailedError(`Anthropic answered what Ratchet cannot read for ${name}: ${(error as Error).message}`);
    }
  }

  /** Discovery: one page of the key's batches, newest first (Anthropic's order); `pageToken` is the page's last id. */
  async listBatches({ pageSize, pageToken, credential }: { pageSize: number; pageToken?: string; credential?: string }) {
    let page: { data: Anthropic.Messages.Batches.MessageBatch[]; has_more: boolean; last_id: string | null };
    try {
      page = await this.call(credential, (client) =>
        client.messages.batches.list({ limit: pageSize, ...(pageToken && { after_id: pageToken }) }),
      );
    } catch (error) {
      throw await this.failed(error, credential);
    }
    const batches: ListedBatch[] = [];
    for (const batch of page.data) {
      const name = anthropicName(batch.id);
      // A batch Ratchet cannot name is none it can track: the page goes on without it.
      if (!isNameOfKind(name, 'anthropic-batch')) continue;
      let createTime: string | undefined;
      try {
        createTime = timeOf(batch.created_at);
      } catch {}
      batches.push({ name, ...(createTime && { createTime }), event: () => eventFromAnthropic(name, batch) });
    }
    const last = page.last_id ?? page.data.at(-1)?.id;
    return { batches, ...(page.has_more && last && { nextPageToken: last }) };
  }

  /** `request` with the client of the key labelled `label`, paced and held back as paced-keys.ts says. */
  private async call<T>(label: string | undefined, request: (client: Anthropic) => Promise<T>): Promise<T> {
    const sdk = await this.loadSdk();
    return this.keys.run(
      label,
      async (key) => request(await this.clientOf(key)),
      (error) => failureOf(sdk, error),
    );
  }

  private async failureOf(error: unknown): Promise<CallFailure> {
    return failureOf(await this.loadSdk(), error);
  }

  /** PollFailedError for what is not an answer: Anthropic's status (a refused key named by its label), or the cause. */
  private async failed(error: unknown, label: string | undefined): Promise<Error> {
    if (error instanceof PollFailedError) return error;
    const { status, retryAfterSeconds } = await this.failureOf(error);
    if (status === undefined) return new PollFailedError(`Anthropic: ${(error as Error).message}`);
    const type = (error as { error?: { error?: { type?: unknown } } }).error?.error?.type;
    const shown = typeof type === 'string' ? ` (${type})` : '';
    const refused = status === 401 || status === 403 ? ` to the key labelled ${JSON.stringify(this.keys.keyOf(label).label)}` : '';
    return new PollFailedError(`Anthropic answered ${status}${shown}${refused}`, status, retryAfterSeconds);
  }

  private loadSdk(): Promise<Sdk> {
    this.sdk ??= import('@anthropic-ai/sdk');
    return this.sdk;
  }

  private clientOf(key: LabelledKey): Promise<Anthropic> {
    let client = this.clients.get(key.label);
    if (!client) {
      client = this.loadSdk().then(
        (sdk) =>
          new sdk.Anthropic({
            apiKey: key.apiKey,
            ...(this.options.baseUrl && { baseURL: this.options.baseUrl }),
            maxRetries: MAX_RETRIES,
            timeout: this.options.timeoutMs ?? DEFAULT_TIMEOUT_MS,
            fetch: fetchHoldingOn429,
          }),
      );
      this.clients.set(key.label, client);
    }
    return client;
  }
}

/** What the SDK's error says: its HTTP status, and a 429's wait. */
function failureOf(sdk: Sdk, error: unknown): CallFailure {
  if (!(error instanceof sdk.APIError) || typeof error.status !== 'number') return {};
  const retryAfterSeconds = error.status === 429 ? retryAfterOf(error.headers) : undefined;
  return { status: error.status, ...(retryAfterSeconds !== undefined && { retryAfterSeconds }) };
}
