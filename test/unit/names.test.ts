import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mapWebhookDelivery } from '../../lambda/core/gemini-webhook.ts';
import type { OperationKind } from '../../lambda/core/lifecycle.ts';
import { InvalidNameError, isNameOfKind, kindOfName, MAX_NAME_BYTES, normalizeOperationName } from '../../lambda/core/names.ts';
import { envelope } from '../support/deliveries.ts';

describe('operation names are Google resource names, checked per kind', () => {
  it.each([
    ['batches/abc', undefined, 'batches/abc'],
    [' batches/abc ', undefined, 'batches/abc'],
    ['batch_abc', undefined, 'batches/abc'],
    ['interaction_9', undefined, 'interactions/9'],
    ['abc-123', 'batch', 'batches/abc-123'],
    ['v1_Chd', 'interaction', 'interactions/v1_Chd'],
    ['models/veo-3.0-generate-001/operations/x1', undefined, 'models/veo-3.0-generate-001/operations/x1'],
    ['operations/o.1', undefined, 'operations/o.1'],
  ] as const)('normalises %j (in a %s event) to %j', (raw, family, name) => {
    expect(normalizeOperationName(raw, family)).toBe(name);
  });

  it.each([
    // Path tricks: a poll of these would send the API key to another Gemini path.
    'batches/../x',
    'batches/./x',
    'batches/x/..',
    'batches/..',
    'models/veo/operations/../../../files/x',
    'batch_../x',
    'interaction_./x',
    // Not one of the four grammars.
    'files/x',
    'tunedModels/x',
    'batches/x/extra',
    'models/veo/operations',
    'x',
    // Empty segments, separators, custom methods, encodings, control characters.
    '',
    '/batches/1',
    'batches//1',
    'batches/1/',
    'batches/1:cancel',
    'batches/%2e%2e',
    'batches/1?alt=media',
    'batches/1#x',
    'a b',
    'batches/\u0000',
    'batches/é',
    `batches/${'x'.repeat(MAX_NAME_BYTES)}`,
  ])('refuses %j', (raw) => {
    expect(() => normalizeOperationName(raw)).toThrow(InvalidNameError);
  });

  it('accepts a name of exactly 512 bytes, not one more', () => {
    const longest = `batches/${'x'.repeat(MAX_NAME_BYTES - 'batches/'.length)}`;
    expect(normalizeOperationName(longest)).toBe(longest);
    expect(() => normalizeOperationName(`${longest}x`)).toThrow(InvalidNameError);
  });

  it('gives a bare id its prefix only in batch and interaction events, and refuses a name of another kind', () => {
    expect(() => normalizeOperationName('abc')).toThrow(InvalidNameError);
    expect(() => normalizeOperationName('abc', 'video')).toThrow(InvalidNameError);
    expect(() => normalizeOperationName('interactions/1', 'batch')).toThrow(/a batch event names a interaction/);
    expect(mapWebhookDelivery(envelope('batch.succeeded', { id: '123' }), 'm')).toMatchObject({ event: { name: 'batches/123' } });
    expect(mapWebhookDelivery(envelope('interaction.completed', { id: 'i9' }), 'm')).toMatchObject({ event: { name: 'interactions/i9' } });
    expect(() => mapWebhookDelivery(envelope('batch.failed', { id: 'batches/../files/x' }), 'm')).toThrow(InvalidNameError);
    expect(() => mapWebhookDelivery(envelope('video.generated', { id: 'batches/1' }), 'm')).toThrow(InvalidNameError);
  });

  it.each([
    ['batches/1', 'batch'],
    ['interactions/1', 'interaction'],
    ['models/veo-3.0-generate-001/operations/1', 'video'],
    ['operations/1', 'operation'],
  ] as const)('knows %s is a %s, and the poller accepts it for that kind only', (name, kind) => {
    expect(kindOfName(name)).toBe(kind);
    for (const other of ['batch', 'interaction', 'video', 'operation'] as const) expect(isNameOfKind(name, other)).toBe(other === kind);
  });

  it('the poller refuses what the edge refuses', () => {
    expect(isNameOfKind('batches/../files/x', 'batch')).toBe(false);
    expect(isNameOfKind('models/veo/operations/../../../files/x', 'video')).toBe(false);
  });

  it('property: whatever string comes in, an accepted name is canonical, of one kind, without dot or empty segments', () => {
    const segment = fc.oneof(fc.constantFrom('.', '..', '', 'batches', 'models', 'operations', 'interactions', 'veo-3.0'), fc.string());
    const raw = fc.oneof(
      fc.string(),
      fc.array(segment, { minLength: 1, maxLength: 6 }).map((parts) => parts.join('/')),
      fc.tuple(fc.constantFrom('batch_', 'interaction_'), fc.string()).map(([prefix, rest]) => prefix + rest),
    );
    const family = fc.constantFrom<OperationKind | undefined>(undefined, 'batch', 'interaction', 'video', 'operation');
    fc.assert(
      fc.property(raw, family, (input, kind) => {
        let name: string;
        try {
          name = normalizeOperationName(input, kind);
        } catch (error) {
          expect(error).toBeInstanceOf(InvalidNameError);
          return;
        }
        const segments = name.split('/');
        expect(segments.every((s) => s !== '' && s !== '.' && s !== '..')).toBe(true);
        expect(Buffer.byteLength(name)).toBeLessThanOrEqual(MAX_NAME_BYTES);
        expect(normalizeOperationName(name)).toBe(name);
        expect(isNameOfKind(name, kindOfName(name))).toBe(true);
        if (kind) expect(kindOfName(name)).toBe(kind);
      }),
      { numRuns: 2000 },
    );
  });
});
