/**
 * Polls Gemini with @google/genai: the adapter behind reconcile. Its web build
 * (fetch only; Node 20 and 22 have it): the Node build adds google-auth-library,
 * ws and polyfills for Vertex and the Live API, a fifth of the bundle, unused here.
 */
import { ApiError, GenerateVideosOperation, GoogleGenAI } from '@google/genai/web';
import {
  eventFromBatch,
  eventFromInteraction,
  eventFromOperation,
  type InteractionAnswer,
  type OperationAnswer,
  UnknownProviderStateError,
} from '../core/gemini-poll.ts';
import type { OperationKind } from '../core/lifecycle.ts';
import { isNameOfKind } from '../core/names.ts';
import { type GeminiPoller, type PollAnswer, PollFailedError } from './poller.ts';
import type { WebhookLister } from './webhook-health.ts';

export class GenAiPoller implements GeminiPoller {
  private readonly ai: GoogleGenAI;

  constructor(options: { apiKey: string; baseUrl?: string; timeoutMs?: number }) {
    this.ai = new GoogleGenAI({
      apiKey: options.apiKey,
      httpOptions: {
        ...(options.baseUrl && { baseUrl: options.baseUrl }),
        timeout: options.timeoutMs ?? 10_000,
        // One quick retry here; reconcile's per-operation backoff handles longer outages.
        retryOptions: { attempts: 2, initialDelay: 0.2, maxDelay: 1 },
      },
    });
  }

  /** Gemini's webhooks API, for the health check. */
  get webhooks(): WebhookLister {
    return this.ai.webhooks as unknown as WebhookLister;
  }

  async poll({ name, kind }: { name: string; kind: OperationKind }): Promise<PollAnswer> {
    // The edge validates every name; this guards records written before it did. The key never goes to another path.
    if (!isNameOfKind(name, kind)) return { kind: 'refused', reason: `not a well-formed ${kind} name` };
    try {
      if (kind === 'batch') return { kind: 'event', event: eventFromBatch(name, await this.ai.batches.get({ name })) };
      if (kind === 'interaction') {
        const answer = await this.ai.interactions.get(name.slice('interactions/'.length));
        return { kind: 'event', event: eventFromInteraction(name, answer as InteractionAnswer) };
      }
      // The SDK wants its own operation class with `name` set; a plain {name} fails.
      const operation = new GenerateVideosOperation();
      operation.name = name;
      const answer =
        kind === 'video' ? await this.ai.operations.getVideosOperation({ operation }) : await this.ai.operations.get({ operation });
      return { kind: 'event', event: eventFromOperation(name, kind, answer as OperationAnswer) };
    } catch (error) {
      if (error instanceof UnknownProviderStateError) throw new PollFailedError(error.message, undefined, error.raw);
      // ApiError from the classic API, the interactions client's own error classes: both carry the HTTP status.
      const status = error instanceof ApiError ? error.status : (error as { status?: unknown }).status;
      if (status === 404) return { kind: 'not-found' };
      if (typeof status === 'number') throw new PollFailedError(`Gemini answered ${status}`, status);
      throw new PollFailedError((error as Error).message);
    }
  }
}
