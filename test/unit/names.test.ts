import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OPERATION_KINDS, type OperationKind } from '../../core/lifecycle.ts';
import { InvalidNameError, isNameOfKind, kindOfName, MAX_NAME_BYTES, normalizeOperationName, platformScopeOf } from '../../core/names.ts';
import { mapWebhookDelivery } from '../../providers/gemini/webhook.ts';
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

  it('gives a bare id its prefix from the event (a video event: an interaction), and reads a whole name by its own shape', () => {
    expect(() => normalizeOperationName('abc')).toThrow(InvalidNameError);
    expect(() => normalizeOperationName('abc', 'operation')).toThrow(InvalidNameError);
    expect(normalizeOperationName('v1_abc', 'video')).toBe('interactions/v1_abc');
    expect(normalizeOperationName('interactions/1', 'batch')).toBe('interactions/1');
    expect(mapWebhookDelivery(envelope('batch.succeeded', { id: '123' }), 'm')).toMatchObject({ event: { name: 'batches/123' } });
    expect(mapWebhookDelivery(envelope('interaction.completed', { id: 'i9' }), 'm')).toMatchObject({ event: { name: 'interactions/i9' } });
    expect(() => mapWebhookDelivery(envelope('batch.failed', { id: 'batches/../files/x' }), 'm')).toThrow(InvalidNameError);
    expect(mapWebhookDelivery(envelope('video.generated', { id: 'batches/1' }), 'm')).toMatchObject({
      event: { name: 'batches/1', kind: 'batch', state: 'SUCCEEDED' },
    });
  });

  it.each([
    ['batches/1', 'batch'],
    ['interactions/1', 'interaction'],
    ['models/veo-3.0-generate-001/operations/1', 'video'],
    ['operations/1', 'operation'],
    ['projects/my-project/locations/us-central1/batchPredictionJobs/123', 'platform-batch'],
    ['projects/123456/locations/us-central1/publishers/google/models/veo-3.1-generate-001/operations/op-9', 'platform-video'],
    ['projects/my-project/locations/global/interactions/v1_abc', 'platform-interaction'],
  ] as const)('knows %s is a %s, and the poller accepts it for that kind only', (name, kind) => {
    expect(normalizeOperationName(name)).toBe(name);
    expect(kindOfName(name)).toBe(kind);
    for (const other of OPERATION_KINDS) expect(isNameOfKind(name, other)).toBe(other === kind);
  });

  it.each([
    'projects/p/locations/l/batchPredictionJobs/../x',
    'projects/p/locations/./batchPredictionJobs/1',
    'projects//locations/l/batchPredictionJobs/1',
    'projects/p/locations/l/batchPredictionJobs/1:cancel',
    'projects/p/locations/l/batchPredictionJobs/%2e%2e',
    'projects/p/locations/l/batchPredictionJobs/1/',
    'projects/p/locations/l/publishers/google/models/veo/operations',
    'projects/p/locations/l/publishers/other/models/veo/operations/1',
    'projects/p/locations/l/models/veo/operations/1',
    'projects/p/locations/l/interactions/i?x=1',
    'projects/p/locations/l/customJobs/1',
    'projects/p/batchPredictionJobs/1',
  ])('refuses the Agent Platform form %j', (raw) => {
    expect(() => normalizeOperationName(raw)).toThrow(InvalidNameError);
  });

  it('names the project and location of an Agent Platform name, and none of a Gemini API name', () => {
    expect(platformScopeOf('projects/p1/locations/us-central1/interactions/i')).toEqual({ project: 'p1', location: 'us-central1' });
    expect(platformScopeOf('interactions/i')).toBeUndefined();
  });

  it('the poller refuses what the edge refuses', () => {
    expect(isNameOfKind('batches/../files/x', 'batch')).toBe(false);
    expect(isNameOfKind('models/veo/operations/../../../files/x', 'video')).toBe(false);
    expect(isNameOfKind('projects/p/locations/l/batchPredictionJobs/..', 'platform-batch')).toBe(false);
  });

  it('property: whatever string comes in, an accepted name is canonical, of one kind, without dot or empty segments', () => {
    const segment = fc.oneof(
      fc.constantFrom(
        '.',
        '..',
        '',
        'batches',
        'models',
        'operations',
        'interactions',
        'veo-3.0',
        'projects',
        'locations',
        'publishers',
        'google',
      ),
      fc.string(),
    );
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
        // A bare id takes the event's family (an interaction for a video event); a whole name keeps its own kind.
        if (kind && !input.includes('/') && !/^(batch|interaction)_/.test(input.trim()))
          expect(kindOfName(name)).toBe(kind === 'video' ? 'interaction' : kind);
      }),
      { numRuns: 2000 },
    );
  });
});
