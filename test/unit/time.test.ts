import { describe, expect, it } from 'vitest';
import { InvalidTimeError, normalizeTime } from '../../core/time.ts';

describe('normalizeTime', () => {
  it.each([
    ['2026-11-30T10:00:05Z', '2026-11-30T10:00:05.000000000Z'],
    ['2026-11-30T10:00:05.1Z', '2026-11-30T10:00:05.100000000Z'],
    ['2026-11-30T10:00:05.123Z', '2026-11-30T10:00:05.123000000Z'],
    ['2026-11-30T10:00:05.123456Z', '2026-11-30T10:00:05.123456000Z'],
    ['2026-11-30T10:00:05.123456789Z', '2026-11-30T10:00:05.123456789Z'],
    ['2026-11-30t10:00:05z', '2026-11-30T10:00:05.000000000Z'],
  ])('keeps every fractional digit of %s', (input, expected) => {
    expect(normalizeTime(input)).toBe(expected);
  });

  it.each([
    ['2026-11-30T11:30:05.5+01:30', '2026-11-30T10:00:05.500000000Z'],
    ['2026-11-30T02:00:05-08:00', '2026-11-30T10:00:05.000000000Z'],
    ['2026-12-31T23:30:00-01:00', '2027-01-01T00:30:00.000000000Z'],
    ['2026-03-01T00:30:00+01:00', '2026-02-28T23:30:00.000000000Z'],
    ['2028-03-01T00:30:00+01:00', '2028-02-29T23:30:00.000000000Z'],
    ['2026-11-30T10:00:05+00:00', '2026-11-30T10:00:05.000000000Z'],
  ])('converts the offset of %s to UTC', (input, expected) => {
    expect(normalizeTime(input)).toBe(expected);
  });

  it('orders where the raw strings do not', () => {
    const whole = '2026-11-30T10:00:05Z';
    const fraction = '2026-11-30T10:00:05.100Z';
    expect(whole > fraction).toBe(true); // the trap
    expect(normalizeTime(whole) < normalizeTime(fraction)).toBe(true);
    expect(normalizeTime('2026-11-30T11:00:00+02:00') < normalizeTime('2026-11-30T09:30:00Z')).toBe(true);
  });

  it.each([
    '',
    'yesterday',
    '2026-11-30',
    '2026-11-30T10:00:05',
    '2026-11-30 10:00:05Z',
    '2026-11-30T10:00:05.Z',
    '2026-11-30T10:00:05.1234567890Z',
    '2026-13-01T00:00:00Z',
    '2026-02-29T00:00:00Z',
    '2026-04-31T00:00:00Z',
    '2026-11-30T24:00:00Z',
    '2026-11-30T10:60:00Z',
    '2026-11-30T10:00:61Z',
    '2026-11-30T10:00:00+24:00',
    '0000-01-01T00:00:00+00:01',
    '2026-11-30T10:00:05+0100',
  ])('rejects %j', (input) => {
    expect(() => normalizeTime(input)).toThrow(InvalidTimeError);
  });

  it('accepts 29 February in leap years only', () => {
    expect(normalizeTime('2028-02-29T00:00:00Z')).toBe('2028-02-29T00:00:00.000000000Z');
    expect(normalizeTime('2000-02-29T00:00:00Z')).toBe('2000-02-29T00:00:00.000000000Z');
    expect(() => normalizeTime('2100-02-29T00:00:00Z')).toThrow(InvalidTimeError);
  });
});
