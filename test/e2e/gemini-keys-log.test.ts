/**
 * No Gemini API key is ever logged, proven on what a user sees: `ratchet
 * start` as a real process with its warnings on, everything it writes to
 * stdout and stderr read, against a fake Gemini that refuses every key and
 * echoes the key it was sent in its error body (as a proxy in front of Gemini
 * may). The webhook health check, discovery and the polls all fail and are
 * logged with what Gemini answered; each key in those lines is redacted.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FakeGemini } from '../support/fake-gemini.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const KEY_A = 'AIzaSyLeakTestKeyAaaaaaaaaaaaaaaaaaaaa';
const KEY_B = 'AIzaSyLeakTestKeyBbbbbbbbbbbbbbbbbbbbb';
/** A key Gemini does not know at all: answered 401. */
const KEY_C = 'AIzaSyLeakTestKeyCccccccccccccccccccccc';
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-keys-log-'));
let gemini: FakeGemini;
let ratchet: RatchetProcess;

beforeAll(async () => {
  gemini = await new FakeGemini('a-key-nobody-uses').start();
  gemini.echoKeyInErrors = true;
  gemini.refusedKeys.add(KEY_A);
  gemini.refusedKeys.add(KEY_B);
  ratchet = await startRatchet({
    DATA_DIR: dataDir,
    GEMINI_API_KEYS: `team-a=${KEY_A} team-b=${KEY_B},team-c=${KEY_C}`,
    GEMINI_BASE_URL: gemini.baseUrl,
    RECONCILE_INTERVAL_SECONDS: '0.5',
    POWERTOOLS_LOG_LEVEL: 'WARN',
  });
});

afterAll(async () => {
  await ratchet?.stop();
  await gemini?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const track = (name: string, credential: string) =>
  ratchet.api('/operations', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, credential }),
  });

describe('the log of a real process, against a Gemini that echoes the key it refuses', () => {
  it('holds every failure Gemini answered, and no key: each is redacted', async () => {
    expect((await track('batches/leak-a', 'team-a')).status).toBe(201);
    expect((await track('batches/leak-c', 'team-c')).status).toBe(201);
    const polledWith = (name: string, key: string) => gemini.requests.some((path, i) => path === name && gemini.requestKeys[i] === key);
    await eventually(
      () =>
        polledWith('batches/leak-a', KEY_A) &&
        polledWith('batches/leak-c', KEY_C) &&
        polledWith('batches', KEY_B) &&
        ratchet.output().includes('webhook health check failed') &&
        ratchet.output().includes('batch discovery failed'),
      30_000,
      'Gemini asked with every key, and the failures logged',
    );
    await ratchet.stop();
    const output = ratchet.output();
    // Gemini's answers were logged (the test sees what a leak would be in) …
    expect(output).toMatch(
      /"level":"WARN","message":"webhook health check failed[^\n]*Permission denied on this key \(the key sent: \[redacted\]\)/,
    );
    expect(output).toMatch(/batch discovery failed[^\n]*\(the key sent: \[redacted\]\)/);
    // … and no key is anywhere in them.
    for (const key of [KEY_A, KEY_B, KEY_C]) expect(output).not.toContain(key);
    // The echo is not the key only where redacted: the fake did send each one back.
    expect(output.match(/the key sent: \[redacted\]/g)?.length).toBeGreaterThanOrEqual(2);
  });
});
