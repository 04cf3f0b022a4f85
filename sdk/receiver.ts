/**
 * `ratchet/receiver`: for the service that receives Ratchet's outbound
 * effects (`EFFECTS_WEBHOOK_URL`). Verifies the Standard Webhooks signature
 * over the raw body and returns the typed `operation.state_changed` event.
 *
 *   const event = verifyEffect(req.headers, rawBody, process.env.EFFECTS_SIGNING_SECRET);
 *   if (await alreadyDone(event.id)) return; // the same id on every retry: name#version
 *
 * Pass the body exactly as received (a string or Buffer), before any JSON
 * parsing: the signature covers those bytes.
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import * as z from 'zod/mini';
import { OPERATION_KINDS, OPERATION_STATES, type OperationKind, type OperationState } from '../lambda/core/lifecycle.ts';
import type { OperationResult } from '../lambda/core/reducer.ts';

export type { OperationKind, OperationResult, OperationState };

export type EffectErrorCode = 'missing-headers' | 'bad-signature' | 'stale-timestamp' | 'malformed-body';

export class EffectVerificationError extends Error {
  override name = 'EffectVerificationError';
  constructor(
    readonly code: EffectErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** One applied state change, as Ratchet sends it. Fields may be added; none is removed. */
export interface StateChangedEvent {
  /** The `webhook-id`: `<name>#<version>`, the same on every retry. Do the work once per id. */
  id: string;
  type: 'operation.state_changed';
  /** When Ratchet recorded the change (ISO 8601, UTC). */
  timestamp: string;
  data: {
    name: string;
    kind: OperationKind;
    state: OperationState;
    previousState: OperationState | null;
    version: number;
    updateTime: string | null;
    providerState: string | null;
    result: OperationResult | null;
    /** The job's metadata, from `track(name, { metadata })` or Gemini's `user_metadata`. */
    userMetadata?: Record<string, unknown>;
  };
}

const State = z.enum(OPERATION_STATES);
const Body = z.object({
  type: z.literal('operation.state_changed'),
  timestamp: z.string(),
  data: z.looseObject({
    name: z.string(),
    kind: z.enum(OPERATION_KINDS),
    state: State,
    previousState: z.nullable(State),
    version: z.number(),
    updateTime: z.nullable(z.string()),
    providerState: z.nullable(z.string()),
    result: z.nullable(z.looseObject({})),
    userMetadata: z.optional(z.record(z.string(), z.unknown())),
  }),
});

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

/**
 * Verifies one delivery and returns its event, or throws EffectVerificationError:
 * `missing-headers`, `bad-signature`, `stale-timestamp` (more than 5 minutes
 * from now: a replay, or a clock far off) or `malformed-body`.
 */
export function verifyEffect(headers: HeaderBag, rawBody: string | Buffer, secret: string): StateChangedEvent {
  const plain = lowercase(headers);
  let json: unknown;
  try {
    // Checks the signature over the raw bytes, then parses them.
    json = new Webhook(secret).verify(rawBody, plain);
  } catch (error) {
    if (error instanceof SyntaxError) throw new EffectVerificationError('malformed-body', `body is not JSON: ${error.message}`);
    if (!(error instanceof WebhookVerificationError)) throw error;
    if (/missing required headers|invalid signature headers/i.test(error.message))
      throw new EffectVerificationError('missing-headers', error.message);
    if (/timestamp/i.test(error.message)) throw new EffectVerificationError('stale-timestamp', error.message);
    throw new EffectVerificationError('bad-signature', error.message);
  }
  const parsed = Body.safeParse(json);
  if (!parsed.success)
    throw new EffectVerificationError('malformed-body', `not an operation.state_changed event: ${z.prettifyError(parsed.error)}`);
  return { id: plain['webhook-id'] as string, ...(parsed.data as Omit<StateChangedEvent, 'id'>) };
}

function lowercase(headers: HeaderBag): Record<string, string> {
  const entries = headers instanceof Headers ? [...headers.entries()] : Object.entries(headers);
  const out: Record<string, string> = {};
  for (const [key, value] of entries) if (value !== undefined) out[key.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  return out;
}
