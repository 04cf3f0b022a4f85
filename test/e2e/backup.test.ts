/**
 * `npm run backup` while `npm start` takes a storm of deliveries: the copy is
 * one consistent moment (every operation's outbox holds exactly its versions,
 * history never ahead of the record), and restores to a runtime that serves it
 * and refuses the change-feed cursors readers kept from before (410).
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DB_FILE } from '../../engines/sqlite/data-folder.ts';
import { Sqlite } from '../../engines/sqlite/sqlite.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type RatchetProcess, runToExit, startRatchet } from '../support/ratchet-process.ts';

const secret = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-backup-'));
const copies = mkdtempSync(join(tmpdir(), 'ratchet-backup-copies-'));
let ratchet: RatchetProcess;

beforeAll(async () => {
  ratchet = await startRatchet({ DATA_DIR: dataDir, WEBHOOK_SIGNING_SECRETS: secret });
});
afterAll(async () => {
  await ratchet?.stop();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(copies, { recursive: true, force: true });
});

const backup = (file: string) =>
  runToExit(['npm', 'run', '-s', 'backup', '--', file], { ...process.env, DATA_DIR: dataDir } as Record<string, string>);

describe('npm run backup', () => {
  it('copies a consistent store while deliveries are being written, and the copy restores', async () => {
    let writing = true;
    let sent = 0;
    const storm = (async () => {
      for (let i = 0; writing; i++) {
        const name = `interactions/backup-${i % 50}`;
        const type = i < 50 ? 'interaction.requires_action' : 'interaction.completed';
        const delivery = signedDelivery(
          secret,
          envelope(type, { id: name, update_time: new Date(Date.UTC(2026, 10, 30, 10, 0, i)).toISOString() }),
        );
        expect((await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', ...delivery })).status).toBe(200);
        sent++;
      }
    })();
    while (sent < 30) await new Promise((resolve) => setTimeout(resolve, 10));
    const cursorOf = async (server: RatchetProcess) => ((await (await server.api('/changes')).json()) as { cursor: string }).cursor;
    const kept = await cursorOf(ratchet);
    const files = [join(copies, 'a.db'), join(copies, 'b.db')];
    for (const file of files) {
      const run = await backup(file);
      expect(run.code, run.output).toBe(0);
      expect(run.output).toMatch(/^backup: .*ratchet\.db copied to .*\(\d+ operation\(s\), schema version \d+\)$/m);
    }
    writing = false;
    await storm;

    for (const file of files) {
      const copy = Sqlite.open(file, { readonly: true });
      try {
        expect(copy.get('PRAGMA integrity_check')).toEqual({ integrity_check: 'ok' });
        expect(copy.get("SELECT value FROM notes WHERE key = 'feed-id'")).toBeUndefined();
        const operations = copy.all<{ name: string; version: number }>('SELECT name, version FROM operations');
        expect(operations.length).toBeGreaterThan(0);
        for (const { name, version } of operations) {
          const changes = copy
            .all<{ version: number }>('SELECT version FROM changes WHERE name = ? ORDER BY seq', name)
            .map((c) => c.version);
          expect(changes, name).toEqual(Array.from({ length: version }, (_, i) => i + 1));
          const history = copy.get<{ top: number | null }>('SELECT max(version) AS top FROM history WHERE name = ?', name)?.top ?? 0;
          expect(history).toBeLessThanOrEqual(version);
        }
      } finally {
        copy.close();
      }
    }
    expect((await backup(files[0] as string)).output).toMatch(/exists; name a new file/);

    // Restore: the copy as the data file of a new folder.
    const restored = join(copies, 'restored');
    mkdirSync(restored);
    copyFileSync(files[1] as string, join(restored, DB_FILE));
    const again = await startRatchet({ DATA_DIR: restored, WEBHOOK_SIGNING_SECRETS: secret });
    try {
      const listed = (await (await again.api(`/operations?limit=100`)).json()) as { operations: Array<{ name: string }> };
      expect(listed.operations.length).toBeGreaterThan(0);
      const first = listed.operations[0]?.name as string;
      expect((await again.api(`/operations/${first}`)).status).toBe(200);
      // A new feed id: the reader's cursor from before the restore is refused, never read on from.
      expect((await again.api(`/changes?after=${kept}`)).status).toBe(410);
      expect((await cursorOf(again)).split('-')[0]).not.toBe(kept.split('-')[0]);
    } finally {
      await again.stop();
    }
  });
});
