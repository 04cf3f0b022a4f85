/**
 * Inside an app with no `apiToken` (nor RATCHET_API_TOKEN), the API token is
 * one kept in this process, good for `ratchet.client` only, as docs/apps.md
 * says: nothing is written into the data folder (often the app's working
 * directory), and a token file found there, `ratchet start`'s, is not
 * accepted either. On SQLite with a data folder, where a file could be.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createRatchet } from '../../local/library.ts';
import { newSecret } from '../support/deliveries.ts';

const folders: string[] = [];
const closing: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const close of closing) await close();
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

function inApp(dataDir: string) {
  const ratchet = createRatchet({ dataDir, webhookSigningSecrets: newSecret(), env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL' } });
  closing.push(() => ratchet.close());
  return ratchet;
}

function folder(): string {
  const made = mkdtempSync(join(tmpdir(), 'ratchet-app-token-'));
  folders.push(made);
  return made;
}

const list = (ratchet: ReturnType<typeof createRatchet>, token: string) =>
  ratchet.fetch(new Request('http://127.0.0.1/operations', { headers: { authorization: `Bearer ${token}` } }));

describe('the API token inside an app, without apiToken', () => {
  it('lives in this process: ratchet.client works, and no token file is written', async () => {
    const data = folder();
    const ratchet = inApp(data);
    expect(await ratchet.track('batches/app-token')).toMatchObject({ created: true });
    expect((await ratchet.list()).operations.map((o) => o.name)).toEqual(['batches/app-token']);
    expect(existsSync(join(data, 'api-token'))).toBe(false);
    expect(readdirSync(data).filter((file) => /token/.test(file))).toEqual([]);
  });

  it('is not a token file found in the data folder: that one is refused (401)', async () => {
    const data = folder();
    const left = 'a-token-ratchet-start-left-0123456789';
    writeFileSync(join(data, 'api-token'), `${left}\n`, { mode: 0o600 });
    const ratchet = inApp(data);
    expect((await ratchet.list()).operations).toEqual([]);
    expect((await list(ratchet, left)).status).toBe(401);
  });
});
