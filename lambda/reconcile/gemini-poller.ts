/**
 * Polls Gemini with @google/genai: the adapter behind reconcile. Its web build
 * (fetch only; Node 20 and 22 have it): the Node build adds google-auth-library,
 * ws and polyfills for Vertex and the Live API, a fifth of the bundle, unused here.
 * The SDK is loaded on the first poll or webhook check: a run with nothing
 * due never reads its half of the bundle.
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
} from '../core/gemini-poll.ts';
import type { OperationKind } from '../core/lifecycle.ts';
import { isNameOfKind } from '../core/names.ts';
import type { BatchLister } from './discovery.ts';
import { type GeminiPoller, type PollAnswer, PollFailedError } from './poller.ts';
import type { WebhookLister } from './webhook-health.ts';

type GenAiSdk = typeof import('@google/genai/web');

export class GenAiPoller implements GeminiPoller, BatchLister {
  private loaded?: Promise<{ ai: GoogleGenAI; sdk: GenAiSdk }>;

  constructor(private readonly options: { apiKey: string; baseUrl?: string; timeoutMs?: number }) {}

  private load(): Promise<{ ai: GoogleGenAI; sdk: GenAiSdk }> {
    const { apiKey, baseUrl, timeoutMs } = this.options;
    this.loaded ??= import('@google/genai/web').then((sdk) => ({
      sdk,
      ai: new sdk.GoogleGenAI({
        apiKey,
        httpOptions: {
          ...(baseUrl && { baseUrl }),
          timeout: timeoutMs ?? 10_000,
          // One quick retry here; reconcile's per-operation backoff handles longer outages.
          retryOptions: { attempts: 2, initialDelay: 0.2, maxDelay: 1 },
        },
      }),
    }));
    return this.loaded;
  }

  /** Gemini's webhooks API, for the health check. */
  readonly webhooks: WebhookLister = {
    list: async (params) => ((await this.load()).ai.webhooks as unknown as WebhookLister).list(params),
  };

  /** One page of the key's batches (for discovery), read as the SDK answers it; the pager's own loop is not used. */
  async listBatches({ pageSize, pageToken }: { pageSize: number; pageToken?: string }): ReturnType<BatchLister['listBatches']> {
    const { ai } = await this.load();
    const pager = await ai.batches.list({ config: { pageSize, ...(pageToken && { pageToken }) } });
    const next = (pager.params as { config?: { pageToken?: string } }).config?.pageToken;
    return {
      batches: pager.page as Array<BatchAnswer & { name?: string; createTime?: string }>,
      ...(next !== undefined && { nextPageToken: next }),
    };
  }

  async poll({ name, kind }: { name: string; kind: OperationKind }): Promise<PollAnswer> {
    // The edge validates every name; this guards records written before it did. The key never goes to another path.
    if (!isNameOfKind(name, kind)) return { kind: 'refused', reason: `not a well-formed ${kind} name` };
    const { ai, sdk } = await this.load();
    try {
      if (kind === 'batch') return { kind: 'event', event: eventFromBatch(name, await ai.batches.get({ name })) };
      if (kind === 'interaction') {
        const answer = await ai.interactions.get(name.slice('interactions/'.length));
        return { kind: 'event', event: eventFromInteraction(name, answer as InteractionAnswer) };
      }
      // The SDK wants its own operation class with `name` set; a plain {name} fails.
      const operation = new sdk.GenerateVideosOperation();
      operation.name = name;
      const answer = kind === 'video' ? await ai.operations.getVideosOperation({ operation }) : await ai.operations.get({ operation });
      return { kind: 'event', event: eventFromOperation(name, kind, answer as OperationAnswer) };
    } catch (error) {
      if (error instanceof UnknownProviderStateError) throw new PollFailedError(error.message, undefined, error.raw);
      // ApiError from the classic API, the interactions client's own error classes: both carry the HTTP status.
      const status = error instanceof sdk.ApiError ? error.status : (error as { status?: unknown }).status;
      if (status === 404) return { kind: 'not-found' };
      if (typeof status === 'number') throw new PollFailedError(`Gemini answered ${status}`, status);
      throw new PollFailedError((error as Error).message);
    }
  }
}
