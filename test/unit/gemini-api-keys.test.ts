/**
 * GEMINI_API_KEYS as the server reads it, case by case from the table the
 * Python client's tests read too (test/cases/gemini-api-keys.json): a client
 * that splits the pairs otherwise finds no label, or the wrong one, for its
 * key, and its jobs are polled with another key, silently.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { geminiKeysOf } from '../../core/credentials.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

interface Case {
  value: string;
  keys: Array<[string, string]> | null;
}

const { cases } = JSON.parse(readFileSync(join(PROJECT_ROOT, 'test/cases/gemini-api-keys.json'), 'utf8')) as { cases: Case[] };

describe('GEMINI_API_KEYS, the shared cases', () => {
  it('holds both kinds of case', () => {
    expect(cases.filter((c) => c.keys === null).length).toBeGreaterThan(5);
    expect(cases.filter((c) => c.keys !== null).length).toBeGreaterThan(5);
  });

  it.each(cases)('reads $value as the table says', ({ value, keys }) => {
    expect(geminiKeysOf(value) ?? null).toEqual(keys === null ? null : keys.map(([label, apiKey]) => ({ label, apiKey })));
  });
});
