/**
 * Several Gemini API keys (GEMINI_API_KEYS=label=key,…), end to end: the
 * local runtime's reconcile against the fake Gemini, which shows a batch only
 * to the key that created it (404 to any other) and refuses a revoked key
 * (403). Each job is polled with its own key only, discovery lists every
 * key's batches and adopts each with its label, a refused key is named by
 * label in /healthz and the console, and no key shows in a record, the
 * console or /healthz. The log, which this process keeps silent, is read in
 * gemini-keys-log.test.ts, from a real process with its warnings on.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GoogleGenAI } from '@google/genai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../app/config.ts';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { RatchetClient, RatchetError } from '../../sdk/client.ts';
import { trackJobs } from '../../sdk/genai.ts';

const KEY_A = 'key-aaaa-0001';
const KEY_B = 'key-bbbb-0002';
const KEYS = `team-a=${KEY_A},team-b=${KEY_B}`;
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-keys-'));
let gemini: FakeGemini;
let runtime: LocalRuntime;
let client: RatchetClient;

beforeAll(async () => {
  gemini = await new FakeGemini(KEY_A).start();
  gemini.otherKeys.add(KEY_B);
  // Made before Ratchet starts, each by its own key: discovery must find both.
  gemini.batches.set('batches/early-a', { state: 'BATCH_STATE_RUNNING', createTime: new Date().toISOString() });
  gemini.owners.set('batches/early-a', KEY_A);
  gemini.batches.set('batches/early-b', { state: 'BATCH_STATE_PENDING', createTime: new Date().toISOString() });
  gemini.owners.set('batches/early-b', KEY_B);
  runtime = await startLocalRuntime(
    loadConfig({ DATA_DIR: dataDir, PORT: '0', GEMINI_API_KEYS: KEYS, GEMINI_BASE_URL: gemini.baseUrl, RECONCILE_INTERVAL_SECONDS: '1' }),
  );
  client = new RatchetClient({ url: runtime.url, token: runtime.apiToken });
});

afterAll(async () => {
  await runtime?.stop();
  await gemini?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

const keysAskedFor = (name: string) => new Set(gemini.requests.flatMap((path, i) => (path === name ? [gemini.requestKeys[i]] : [])));

describe('several Gemini API keys', () => {
  it('refuses GEMINI_API_KEYS beside GEMINI_API_KEY, and a malformed one, in one line naming them (never a key)', () => {
    expect(() => loadConfig({ GEMINI_API_KEYS: KEYS, GEMINI_API_KEY: KEY_A })).toThrow(ConfigError);
    expect(() => loadConfig({ GEMINI_API_KEYS: KEYS, GEMINI_API_KEY: KEY_A })).toThrow(/GEMINI_API_KEYS and GEMINI_API_KEY are both set/);
    for (const bad of ['just-a-key', 'a=k1,a=k2', '=k1', 'a b=k1', 'a=']) {
      let message = '';
      try {
        loadConfig({ GEMINI_API_KEYS: bad });
      } catch (error) {
        message = (error as Error).message;
      }
      expect(message).toMatch(/^GEMINI_API_KEYS must be label=key pairs/);
      expect(message).not.toContain('k1');
    }
  });

  it('discovery lists each key’s batches and adopts each with the label of the key that sees it', async () => {
    await expect.poll(() => client.get('batches/early-a'), { timeout: 10_000 }).toMatchObject({ state: 'RUNNING', credential: 'team-a' });
    await expect.poll(() => client.get('batches/early-b'), { timeout: 10_000 }).toMatchObject({ state: 'PENDING', credential: 'team-b' });
    // Polled on with its own key only.
    gemini.batches.set('batches/early-b', { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
    expect(await client.waitFor('batches/early-b', { timeoutMs: 20_000 })).toMatchObject({ state: 'SUCCEEDED' });
    expect(keysAskedFor('batches/early-b')).toEqual(new Set([KEY_B]));
  });

  it('polls a tracked job with the key its credential names, and no other', async () => {
    const ai = trackJobs(new GoogleGenAI({ apiKey: KEY_B, httpOptions: { baseUrl: gemini.baseUrl } }), client, { keys: KEYS });
    const job = await ai.batches.create({
      model: 'gemini-2.5-flash',
      src: { inlinedRequests: [{ contents: [{ parts: [{ text: 'hi' }] }] }] },
    });
    const name = job.name as string;
    gemini.owners.set(name, KEY_B);
    expect(await client.get(name)).toMatchObject({ credential: 'team-b' });
    gemini.batches.set(name, {
      state: 'BATCH_STATE_SUCCEEDED',
      updateTime: new Date().toISOString(),
      batchStats: { requestCount: '1', successfulRequestCount: '1' },
    });
    expect(await client.waitFor(name, { timeoutMs: 20_000 })).toMatchObject({
      state: 'SUCCEEDED',
      result: { batchStats: { requestCount: 1, successfulRequestCount: 1 } },
    });
    expect(keysAskedFor(name)).toEqual(new Set([KEY_B]));

    const byA = 'batches/tracked-by-a';
    gemini.batches.set(byA, { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
    gemini.owners.set(byA, KEY_A);
    await client.track(byA, { credential: 'team-a' });
    expect(await client.waitFor(byA, { timeoutMs: 20_000 })).toMatchObject({ state: 'SUCCEEDED', credential: 'team-a' });
    expect(keysAskedFor(byA)).toEqual(new Set([KEY_A]));
  });

  it('records the first key’s label on a job tracked with none, the key it is polled with', async () => {
    const name = 'batches/no-label';
    gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
    gemini.owners.set(name, KEY_A);
    expect((await client.track(name)).operation).toMatchObject({ credential: 'team-a' });
    expect(await client.waitFor(name, { timeoutMs: 20_000 })).toMatchObject({ state: 'SUCCEEDED', credential: 'team-a' });
    expect(keysAskedFor(name)).toEqual(new Set([KEY_A]));
  });

  it('refuses a track whose credential names no key, listing the labels (400, nothing stored)', async () => {
    const error = await client.track('batches/nobody', { credential: 'team-z' }).catch((e) => e);
    expect(error).toBeInstanceOf(RatchetError);
    expect(error).toMatchObject({ status: 400, code: 'malformed-request' });
    expect(error.message).toMatch(/"team-z" names no key: GEMINI_API_KEYS has "team-a", "team-b"/);
    expect(await client.get('batches/nobody')).toBeUndefined();
  });

  it('names a key Gemini refuses by its label in /healthz and the console; the other key’s jobs go on', async () => {
    gemini.refusedKeys.add(KEY_B);
    gemini.otherKeys.delete(KEY_B);
    const revoked = 'batches/revoked-b';
    gemini.batches.set(revoked, { state: 'BATCH_STATE_RUNNING', updateTime: new Date().toISOString() });
    gemini.owners.set(revoked, KEY_B);
    await client.track(revoked, { credential: 'team-b' });
    await expect
      .poll(async () => (await fetch(`${runtime.url}/healthz`)).json(), { timeout: 10_000 })
      .toMatchObject({ status: 'ok', geminiKeys: { refused: [{ label: 'team-b', status: 403 }] } });
    const view = await client.get(revoked);
    expect(view?.state).toBeNull();
    expect(view?.polling.note).toMatch(/answered 403 \(the key labelled "team-b"\)/);
    const page = await (await fetch(`${runtime.url}/`, { headers: { authorization: `Bearer ${runtime.apiToken}` } })).text();
    expect(page).toMatch(/id="gemini-keys-note"/);
    expect(page).toContain('<code>team-b</code> (answered 403');
    // team-a is untouched.
    const byA = 'batches/still-a';
    gemini.batches.set(byA, { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
    gemini.owners.set(byA, KEY_A);
    await client.track(byA, { credential: 'team-a' });
    expect(await client.waitFor(byA, { timeoutMs: 20_000 })).toMatchObject({ state: 'SUCCEEDED' });
  });

  it('never shows a key: not in a record, the console or /healthz', async () => {
    const answers = [
      JSON.stringify(await client.get('batches/early-b')),
      await (await fetch(`${runtime.url}/healthz`)).text(),
      await (
        await fetch(`${runtime.url}/console/operations/batches/revoked-b`, { headers: { authorization: `Bearer ${runtime.apiToken}` } })
      ).text(),
    ];
    for (const answer of answers) {
      expect(answer).not.toContain(KEY_A);
      expect(answer).not.toContain(KEY_B);
    }
  });
});
