import { describe, expect, it } from 'vitest';
import { parseProviderJson, providerNumber, storableNumber } from '../../core/provider-values.ts';

describe('provider numbers are kept exactly', () => {
  it.each([
    ['500', 500],
    ['-3', -3],
    ['0.5', 0.5],
    ['1e-7', 1e-7],
    ['9007199254740991', 9007199254740991],
  ])('%s stays a number', (literal, value) => {
    expect(providerNumber(literal)).toBe(value);
  });

  it.each([
    '1e200', // beyond DynamoDB's range
    '1e-200', // below it
    '123456789012345678901234567890123456789', // 39 digits
    '9007199254740993', // 2^53 + 1: a JavaScript number would round it
    '9007199254740992', // 2^53: not a safe integer
    '-0',
    '1.50', // a number would lose the spelling
  ])('%s is kept as its literal text', (literal) => {
    expect(providerNumber(literal)).toBe(literal);
  });

  it('numbers the SDK has parsed become text when DynamoDB could not store them', () => {
    expect(storableNumber(404)).toBe(404);
    expect(storableNumber(1e200)).toBe('1e+200');
    expect(storableNumber(2 ** 53)).toBe('9007199254740992');
  });

  it('parses bodies like JSON.parse, numbers through providerNumber', () => {
    expect(parseProviderJson('{"error":{"code":9007199254740993,"message":"x"},"n":[1,2.5]}')).toEqual({
      error: { code: '9007199254740993', message: 'x' },
      n: [1, 2.5],
    });
  });

  it('throws SyntaxError for anything that is not JSON, nesting too deep included', () => {
    for (const text of ['{', '', '{"a":1,}', `${'['.repeat(200_000)}${']'.repeat(200_000)}`]) {
      expect(() => parseProviderJson(text)).toThrow(SyntaxError);
    }
  });

  it('keeps __proto__ as an own key, never as a prototype', () => {
    const value = parseProviderJson('{"__proto__":{"polluted":true}}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.keys(value)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
