/**
 * Provider data, kept exactly. Gemini's JSON may hold numbers that neither
 * JavaScript (integers beyond 2^53) nor DynamoDB (beyond 38 digits, outside
 * 1e-130..1e126) can hold exactly. They are authentic, so they are kept as
 * their literal text instead of being rounded or refused by the store.
 */
import { parse } from 'lossless-json';

/** A number literal as a JavaScript number when that is exact and storable, else the literal itself. */
export function providerNumber(literal: string): number | string {
  const value = Number(literal);
  return String(value) === literal && storable(value) ? value : literal;
}

/** A number the SDK has already parsed: kept as a number when storable, else as its text. */
export function storableNumber(value: number): number | string {
  return storable(value) ? value : String(value);
}

function storable(value: number): boolean {
  if (!Number.isFinite(value)) return false;
  if (Number.isInteger(value)) return Number.isSafeInteger(value);
  return Math.abs(value) >= 1e-130 && Math.abs(value) < 1e126;
}

/**
 * JSON.parse for provider bodies, with every number through providerNumber.
 * Throws SyntaxError for anything that is not JSON, nesting too deep included.
 */
export function parseProviderJson(text: string): unknown {
  try {
    return parse(text, null, providerNumber);
  } catch (error) {
    if (error instanceof RangeError) throw new SyntaxError('JSON nested too deeply');
    throw error;
  }
}
