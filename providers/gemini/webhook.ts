/**
 * Gemini webhook envelope -> canonical event. Pure; the signature was checked
 * before this runs.
 */
import * as z from 'zod/mini';
import type { OperationKind, OperationState } from '../../core/lifecycle.ts';
import { kindOfName, normalizeOperationName } from '../../core/names.ts';
import type { OperationResult } from '../../core/reducer.ts';
import { normalizeTime } from '../../core/time.ts';
import { MalformedEventError, type WebhookMapping } from '../port.ts';

export const WEBHOOK_EVENT_TYPES: Readonly<Record<string, { kind: OperationKind; state: OperationState }>> = {
  'batch.succeeded': { kind: 'batch', state: 'SUCCEEDED' },
  'batch.failed': { kind: 'batch', state: 'FAILED' },
  'batch.cancelled': { kind: 'batch', state: 'CANCELLED' },
  'batch.expired': { kind: 'batch', state: 'EXPIRED' },
  'video.generated': { kind: 'video', state: 'SUCCEEDED' },
  'interaction.completed': { kind: 'interaction', state: 'SUCCEEDED' },
  'interaction.failed': { kind: 'interaction', state: 'FAILED' },
  'interaction.cancelled': { kind: 'interaction', state: 'CANCELLED' },
  'interaction.requires_action': { kind: 'interaction', state: 'REQUIRES_ACTION' },
};

/**
 * The events a static Gemini webhook is subscribed to (`npm run connect`): every
 * type above that Gemini's webhooks API offers. It offers no `*.cancelled`:
 * cancellations are learned by polling.
 */
export const SUBSCRIBED_EVENTS = [
  'batch.succeeded',
  'batch.failed',
  'batch.expired',
  'video.generated',
  'interaction.completed',
  'interaction.failed',
  'interaction.requires_action',
] as const satisfies ReadonlyArray<keyof typeof WEBHOOK_EVENT_TYPES>;

const Envelope = z.object({ type: z.string().check(z.minLength(1)) });

const text = z.optional(z.string());
const metadata = z.optional(z.record(z.string(), z.unknown()));
const KnownEnvelope = z.object({
  type: z.string(),
  /** Dynamic webhooks: the job's `webhookConfig.user_metadata`, returned on each event. */
  user_metadata: metadata,
  // Any envelope `version` is read: the fields Ratchet reads are the same in every version Gemini has sent.
  timestamp: z.string(),
  data: z.looseObject({
    id: z.string().check(z.minLength(1)),
    update_time: text,
    updateTime: text,
    output_file_uri: text,
    outputFileUri: text,
    video_uri: text,
    videoUri: text,
    rai_media_filtered_count: z.optional(z.number()),
    raiMediaFilteredCount: z.optional(z.number()),
    rai_media_filtered_reasons: z.optional(z.array(z.string())),
    raiMediaFilteredReasons: z.optional(z.array(z.string())),
    user_metadata: metadata,
    userMetadata: metadata,
    error: z.optional(
      z.union([
        z.string(),
        z.looseObject({
          code: z.optional(z.union([z.number(), z.string()])),
          message: text,
          status: text,
        }),
      ]),
    ),
  }),
});

/**
 * Maps a delivery body parsed by parseProviderJson (numbers no JavaScript or
 * DynamoDB number can hold exactly arrive as their literal text). Unknown types (pings, future events) are
 * `ignored`; a known type with missing or invalid fields throws
 * MalformedEventError (and so does a time that does not parse).
 */
export function mapWebhookDelivery(body: unknown, deliveryId: string): WebhookMapping {
  const envelope = Envelope.safeParse(body);
  if (!envelope.success) throw new MalformedEventError(`not a Gemini webhook envelope: ${z.prettifyError(envelope.error)}`);
  const type = WEBHOOK_EVENT_TYPES[envelope.data.type];
  if (!type) return { kind: 'ignored', type: envelope.data.type };

  const parsed = KnownEnvelope.safeParse(body);
  if (!parsed.success) throw new MalformedEventError(`invalid ${envelope.data.type} event: ${z.prettifyError(parsed.error)}`);
  const { data, timestamp } = parsed.data;
  const result = resultOf(data);
  const userMetadata = data.user_metadata ?? data.userMetadata ?? parsed.data.user_metadata;
  // A video the safety filters blocked is announced as generated, with no video: a failure.
  const blocked = type.kind === 'video' && !result?.outputUri && result?.filtered;
  // The event's type gives a bare id its family; a whole name is read by its own shape (Omni video is an interaction).
  const name = normalizeOperationName(data.id, type.kind);
  return {
    kind: 'event',
    event: {
      name,
      kind: kindOfName(name),
      state: blocked ? 'FAILED' : type.state,
      providerState: envelope.data.type,
      // The event's own time when the payload has one, else the envelope's.
      updateTime: normalizeTime(data.update_time ?? data.updateTime ?? timestamp),
      source: 'webhook',
      eventId: deliveryId,
      result: blocked
        ? { ...result, error: { status: 'FILTERED', message: `blocked by safety filters: ${blocked.count} video(s) filtered` } }
        : result,
      ...(userMetadata && { userMetadata }),
    },
  };
}

function resultOf(data: z.infer<typeof KnownEnvelope>['data']): OperationResult | undefined {
  const outputUri = data.output_file_uri ?? data.outputFileUri ?? data.video_uri ?? data.videoUri;
  const error =
    typeof data.error === 'string'
      ? { message: data.error }
      : data.error && { code: data.error.code, message: data.error.message, status: data.error.status };
  const filteredCount = data.rai_media_filtered_count ?? data.raiMediaFilteredCount ?? 0;
  const filtered =
    filteredCount > 0
      ? { count: filteredCount, reasons: data.rai_media_filtered_reasons ?? data.raiMediaFilteredReasons ?? [] }
      : undefined;
  if (outputUri === undefined && error === undefined && filtered === undefined) return undefined;
  return {
    ...(outputUri !== undefined && { outputUri }),
    ...(error !== undefined && { error: stripUndefined(error) }),
    ...(filtered && { filtered }),
  };
}

function stripUndefined<T extends object>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as T;
}
