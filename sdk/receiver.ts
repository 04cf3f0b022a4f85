/**
 * `ratchet/receiver`: for the service that receives Ratchet's outbound
 * effects (`EFFECTS_WEBHOOK_URL`). Verifies the Standard Webhooks signature
 * over the raw body and returns the typed event: `operation.state_changed`,
 * `operation.overdue`, or `operation.result` (a finished job's outcome, learnt
 * after its state).
 *
 *   const event = verifyEffect(req.headers, rawBody, process.env.EFFECTS_SIGNING_SECRET);
 *   if (await alreadyDone(event.id)) return; // the same id on every retry: name#version
 *
 * Pass the body exactly as received (a string or Buffer), before any JSON
 * parsing: the signature covers those bytes.
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import * as z from 'zod/mini';
import { OPERATION_STATES, type OperationKind, type OperationState, type ProviderName, providerOf } from '../core/lifecycle.ts';
import type { OperationResult } from '../core/reducer.ts';

export type { OperationKind, OperationResult, OperationState, ProviderName };

/** What Ratchet sends: a state change, a job found overdue, a finished job's outcome learnt after its state. */
export const EFFECT_TYPES = ['operation.state_changed', 'operation.overdue', 'operation.result'] as const;
export type EffectType = (typeof EFFECT_TYPES)[number];

export type EffectErrorCode = 'missing-secret' | 'missing-headers' | 'bad-signature' | 'stale-timestamp' | 'malformed-body';

export class EffectVerificationError extends Error {
  override name = 'EffectVerificationError';
  constructor(
    readonly code: EffectErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * One applied state change (`operation.state_changed`), a job found open past its kind's limit
 * (`operation.overdue`, once per job, `data.overdue` set), or a finished job's outcome learnt after its state
 * (`operation.result`: OpenAI's webhooks name the job alone, so its counts come by the poll after; once, after that
 * state's `operation.state_changed`, the state unchanged), as Ratchet sends it. The last effect of a job always
 * carries its outcome in `data.result`. Fields may be added; none is removed.
 */
export interface StateChangedEvent {
  /** The `webhook-id`: `<name>#<version>`, the same on every retry. Do the work once per id. */
  id: string;
  type: EffectType;
  /** When Ratchet recorded the change (ISO 8601, UTC). */
  timestamp: string;
  data: {
    name: string;
    kind: OperationKind;
    /** Who runs the job (`gemini`, `openai`, `anthropic`, `bedrock`, `azure-openai`): route by it. */
    provider: ProviderName;
    state: OperationState;
    previousState: OperationState | null;
    version: number;
    updateTime: string | null;
    providerState: string | null;
    /** The outcome of a finished job (`outputUri`, `requestCounts`, `usage`, `error`…), each field where the provider gave it. */
    result: OperationResult | null;
    /** The job's metadata, from `track(name, { metadata })` or Gemini's `user_metadata`. */
    userMetadata?: Record<string, unknown>;
    /** `operation.overdue` only: when Ratchet found it overdue, its kind's limit, and since when it is open. */
    overdue?: { at: string; afterSeconds: number; openSince: string };
  };
}

const State = z.enum(OPERATION_STATES);
const Body = z.object({
  type: z.enum(EFFECT_TYPES),
  timestamp: z.string(),
  data: z.looseObject({
    name: z.string(),
    // Any kind: a receiver keeps working when Ratchet learns a new one (OPERATION_KINDS are today's).
    kind: z.string().check(z.minLength(1)),
    // Any provider, likewise; a Ratchet from before providers sent none: its kind says which (every one Gemini's).
    provider: z.optional(z.string().check(z.minLength(1))),
    state: State,
    previousState: z.nullable(State),
    version: z.number(),
    updateTime: z.nullable(z.string()),
    providerState: z.nullable(z.string()),
    result: z.nullable(z.looseObject({})),
    userMetadata: z.optional(z.record(z.string(), z.unknown())),
    overdue: z.optional(z.looseObject({ at: z.string(), afterSeconds: z.number(), openSince: z.string() })),
  }),
});

type HeaderBag = Headers | Record<string, string | string[] | undefined>;

/**
 * Verifies one delivery and returns its event, or throws EffectVerificationError
 * (and only that): `missing-secret` (no secret given, or not `whsec_<base64>`),
 * `missing-headers`, `bad-signature`, `stale-timestamp` (more than 5 minutes
 * from now: a replay, or a clock far off) or `malformed-body`.
 */
export function verifyEffect(headers: HeaderBag, rawBody: string | Buffer, secret: string): StateChangedEvent {
  const signer = webhookOf(secret);
  const plain = lowercase(headers ?? {});
  let json: unknown;
  try {
    // Checks the signature over the raw bytes, then parses them.
    json = signer.verify(rawBody, plain);
  } catch (error) {
    if (error instanceof SyntaxError) throw new EffectVerificationError('malformed-body', `body is not JSON: ${error.message}`);
    const message = (error as Error).message ?? String(error);
    if (!(error instanceof WebhookVerificationError))
      throw new EffectVerificationError('malformed-body', `body cannot be read: ${message}`);
    if (/missing required headers|invalid signature headers/i.test(message)) throw new EffectVerificationError('missing-headers', message);
    if (/timestamp/i.test(message)) throw new EffectVerificationError('stale-timestamp', message);
    throw new EffectVerificationError('bad-signature', message);
  }
  const parsed = Body.safeParse(json);
  if (!parsed.success)
    throw new EffectVerificationError(
      'malformed-body',
      `not one of Ratchet's events (${EFFECT_TYPES.join(', ')}): ${z.prettifyError(parsed.error)}`,
    );
  const event = parsed.data as Omit<StateChangedEvent, 'id'>;
  return {
    id: plain['webhook-id'] as string,
    ...event,
    data: { ...event.data, provider: event.data.provider ?? providerOf(event.data.kind) },
  };
}

/** The verifier for `secret`, or `missing-secret` (an unset EFFECTS_SIGNING_SECRET is the usual cause), never the value. */
function webhookOf(secret: unknown): Webhook {
  if (typeof secret !== 'string' || secret.trim() === '')
    throw new EffectVerificationError(
      'missing-secret',
      'no signing secret given: pass the whsec_<base64> secret Ratchet signs effects with (EFFECTS_SIGNING_SECRET)',
    );
  const value = secret.trim();
  try {
    if (/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(value)) return new Webhook(value);
  } catch {}
  throw new EffectVerificationError('missing-secret', 'the signing secret is not of the form whsec_<base64> (EFFECTS_SIGNING_SECRET)');
}

function lowercase(headers: HeaderBag): Record<string, string> {
  const entries = headers instanceof Headers ? [...headers.entries()] : Object.entries(headers);
  const out: Record<string, string> = {};
  for (const [key, value] of entries) if (value !== undefined) out[key.toLowerCase()] = Array.isArray(value) ? value.join(',') : value;
  return out;
}
