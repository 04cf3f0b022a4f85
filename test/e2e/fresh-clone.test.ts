/**
 * A fresh clone, as a new user gets it: no node_modules, then `npm start`
 * with nothing typed before it. The dependency check installs from the
 * lockfile, Ratchet comes up, and Ctrl-C leaves no process behind.
 *
 * Slow (a whole `npm ci`), so it runs once per `npm test`.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { PROJECT_ROOT, startRatchet } from '../support/ratchet-process.ts';

const clone = mkdtempSync(join(tmpdir(), 'ratchet-clone-'));
afterAll(() => rmSync(clone, { recursive: true, force: true }));

/** The working tree as git sees it (committed and new files, nothing ignored): what a clone of it would hold. */
function copyWorkingTree(to: string): void {
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: PROJECT_ROOT })
    .toString()
    .split('\0')
    .filter((file) => file && existsSync(join(PROJECT_ROOT, file)));
  for (const file of files) {
    mkdirSync(dirname(join(to, file)), { recursive: true });
    cpSync(join(PROJECT_ROOT, file), join(to, file));
  }
}

/** Every live process whose command line mentions `dir`. */
function processesIn(dir: string): string[] {
  return readdirSync('/proc')
    .filter((pid) => /^\d+$/.test(pid))
    .flatMap((pid) => {
      try {
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
        return cmdline.includes(dir) ? [`${pid}: ${cmdline}`] : [];
      } catch {
        return []; // Gone while we looked.
      }
    });
}

it('npm start installs the dependencies, comes up, and Ctrl-C leaves no process', { timeout: 300_000 }, async () => {
  copyWorkingTree(clone);
  expect(existsSync(join(clone, 'node_modules'))).toBe(false);

  const ratchet = await startRatchet({ WEBHOOK_SIGNING_SECRETS: '' }, { cwd: clone, readyWithinMs: 240_000 });
  expect(ratchet.output()).toContain('ratchet: installing dependencies from package-lock.json (node_modules is missing)');
  expect((await fetch(`${ratchet.url}/healthz`)).status).toBe(200);
  expect(existsSync(join(clone, '.ratchet-data', 'ratchet.db'))).toBe(true);
  expect(processesIn(clone).filter((line) => line.includes('java'))).toEqual([]);

  await ratchet.stop();
  expect(ratchet.output()).toContain('Ratchet stopping (SIGINT)');
  expect(processesIn(clone)).toEqual([]);

  // Installed and unchanged: the second start skips the install.
  const again = await startRatchet({ WEBHOOK_SIGNING_SECRETS: '' }, { cwd: clone });
  await again.stop();
  expect(again.output()).not.toContain('installing dependencies');
});
