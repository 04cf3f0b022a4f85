import { describe, expect, it } from 'vitest';
import { InvalidNameError } from '../../core/names.ts';
import { InvalidTimeError } from '../../core/time.ts';
import { mapWebhookDelivery, SUBSCRIBED_EVENTS } from '../../providers/gemini/webhook.ts';
import { MalformedEventError } from '../../providers/port.ts';
import { envelope } from '../support/deliveries.ts';

describe('SUBSCRIBED_EVENTS (what npm run connect subscribes to)', () => {
  it.each(SUBSCRIBED_EVENTS)('%s is mapped to an operation event', (type) => {
    const id = type.startsWith('batch') ? 'batches/1' : type.startsWith('video') ? 'models/veo/operations/1' : 'interactions/1';
    expect(mapWebhookDelivery(envelope(type, { id }), 'msg_1')).toMatchObject({ kind: 'event' });
  });
});

describe('mapWebhookDelivery: dynamic-webhook metadata and filtered videos', () => {
  it('keeps user_metadata (in data or beside it) on the event', () => {
    const inData = mapWebhookDelivery(envelope('batch.succeeded', { id: 'batches/1', user_metadata: { tenant: 'a', n: 1 } }), 'm');
    expect(inData).toMatchObject({ event: { userMetadata: { tenant: 'a', n: 1 } } });
    const beside = mapWebhookDelivery({ ...envelope('batch.succeeded', { id: 'batches/1' }), user_metadata: { tenant: 'b' } }, 'm');
    expect(beside).toMatchObject({ event: { userMetadata: { tenant: 'b' } } });
    expect(mapWebhookDelivery(envelope('batch.succeeded', { id: 'batches/1' }), 'm')).not.toHaveProperty('event.userMetadata');
  });

  it('maps a video.generated that carries a filter count and no video to FAILED', () => {
    const blocked = mapWebhookDelivery(
      envelope('video.generated', { id: 'models/veo/operations/2', rai_media_filtered_count: 1, rai_media_filtered_reasons: ['x'] }),
      'm',
    );
    expect(blocked).toMatchObject({
      event: {
        state: 'FAILED',
        providerState: 'video.generated',
        result: { error: { status: 'FILTERED' }, filtered: { count: 1, reasons: ['x'] } },
      },
    });
    const made = mapWebhookDelivery(envelope('video.generated', { id: 'models/veo/operations/2', video_uri: 'files/v' }), 'm');
    expect(made).toMatchObject({ event: { state: 'SUCCEEDED', result: { outputUri: 'files/v' } } });
  });
});

describe('mapWebhookDelivery', () => {
  it.each([
    ['batch.succeeded', 'batches/7', 'batch', 'SUCCEEDED'],
    ['batch.failed', 'batches/7', 'batch', 'FAILED'],
    ['batch.cancelled', 'batches/7', 'batch', 'CANCELLED'],
    ['batch.expired', 'batches/7', 'batch', 'EXPIRED'],
    ['video.generated', 'models/veo-3.0-generate-001/operations/abc', 'video', 'SUCCEEDED'],
    ['interaction.completed', 'interactions/i9', 'interaction', 'SUCCEEDED'],
    ['interaction.failed', 'interactions/i9', 'interaction', 'FAILED'],
    ['interaction.cancelled', 'interactions/i9', 'interaction', 'CANCELLED'],
    ['interaction.requires_action', 'interactions/i9', 'interaction', 'REQUIRES_ACTION'],
  ])('maps %s', (type, id, kind, state) => {
    expect(mapWebhookDelivery(envelope(type, { id }, '2026-11-30T10:00:05.25+01:00'), 'msg_1')).toEqual({
      kind: 'event',
      event: {
        name: id,
        kind,
        state,
        providerState: type,
        updateTime: '2026-11-30T09:00:05.250000000Z',
        source: 'webhook',
        eventId: 'msg_1',
      },
    });
  });

  it('normalises batch_123 and batches/123 to the same name', () => {
    const a = mapWebhookDelivery(envelope('batch.succeeded', { id: 'batch_123' }), 'm');
    const b = mapWebhookDelivery(envelope('batch.succeeded', { id: 'batches/123' }), 'm');
    expect(a.kind === 'event' && a.event.name).toBe('batches/123');
    expect(b.kind === 'event' && b.event.name).toBe('batches/123');
  });

  it('prefers the payload update time over the envelope time', () => {
    const mapped = mapWebhookDelivery(envelope('batch.failed', { id: 'batches/1', update_time: '2026-11-30T08:00:00.123456Z' }), 'm');
    expect(mapped.kind === 'event' && mapped.event.updateTime).toBe('2026-11-30T08:00:00.123456000Z');
  });

  it.each([
    [{ output_file_uri: 'files/batch-out' }, { outputUri: 'files/batch-out' }],
    [{ video_uri: 'https://example.test/v.mp4' }, { outputUri: 'https://example.test/v.mp4' }],
    [{ error: { code: 13, message: 'internal' } }, { error: { code: 13, message: 'internal' } }],
    [{ error: 'quota exceeded' }, { error: { message: 'quota exceeded' } }],
  ])('keeps the result %j', (data, result) => {
    const mapped = mapWebhookDelivery(envelope('video.generated', { id: 'models/veo/operations/1', ...data }), 'm');
    expect(mapped.kind === 'event' && mapped.event.result).toEqual(result);
  });

  it('ignores unknown types, even without data', () => {
    expect(mapWebhookDelivery({ type: 'ping' }, 'm')).toEqual({ kind: 'ignored', type: 'ping' });
    expect(mapWebhookDelivery(envelope('batch.paused', { id: 'batches/1' }), 'm')).toEqual({ kind: 'ignored', type: 'batch.paused' });
  });

  it.each([
    ['a non-object', 'hello'],
    ['no type', { data: { id: 'batches/1' } }],
    ['no data', { type: 'batch.succeeded', timestamp: '2026-11-30T10:00:00Z' }],
    ['no id', envelope('batch.succeeded', {})],
    ['an empty id', envelope('batch.succeeded', { id: '' })],
    ['no timestamp', { type: 'batch.succeeded', data: { id: 'batches/1' } }],
  ])('rejects %s as malformed', (_, body) => {
    expect(() => mapWebhookDelivery(body, 'm')).toThrow(MalformedEventError);
  });

  it('rejects an unparseable time', () => {
    expect(() => mapWebhookDelivery(envelope('batch.succeeded', { id: 'batches/1' }, '30/11/2026'), 'm')).toThrow(InvalidTimeError);
  });

  it('rejects an id that is not a resource name', () => {
    expect(() => mapWebhookDelivery(envelope('batch.succeeded', { id: 'batches/1 OR 1=1' }), 'm')).toThrow(InvalidNameError);
  });
});
