/**
 * A fresh clone, as a new user gets it: no node_modules, then `npm start`
 * with nothing typed before it. The dependency check installs from the
 * lockfile, Ratchet comes up; the README's tour runs beside it, command by
 * command as the README has them (the demo, then the signed webhooks and the
 * read, each doing what its comment says, and a new sign-in link); Ctrl-C
 * leaves no process behind.
 *
 * Slow (a whole `npm ci`), so it runs once per `npm test`.
 */
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, inject, it } from 'vitest';
import { PROJECT_ROOT, startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const run = promisify(execFile);

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

  // As a newcomer's shell has it: no token or secret of the tests' own.
  const ratchet = await startRatchet({ WEBHOOK_SIGNING_SECRETS: '', RATCHET_API_TOKEN: '' }, { cwd: clone, readyWithinMs: 240_000 });
  expect(ratchet.output()).toContain('ratchet: installing dependencies from package-lock.json (node_modules is missing)');
  expect((await fetch(`${ratchet.url}/healthz`)).status).toBe(200);
  expect(existsSync(join(clone, '.ratchet-data', 'ratchet.db'))).toBe(true);
  expect(processesIn(clone).filter((line) => line.includes('java'))).toEqual([]);

  await tour(ratchet.url);

  await ratchet.stop();
  expect(ratchet.output()).toContain('Ratchet stopping (SIGINT)');
  expect(processesIn(clone)).toEqual([]);

  // Installed and unchanged: the second start skips the install.
  const again = await startRatchet({ WEBHOOK_SIGNING_SECRETS: '' }, { cwd: clone });
  await again.stop();
  expect(again.output()).not.toContain('installing dependencies');

  // The same clone's first start on PostgreSQL, no data folder yet: it makes the one it needs for its token and secret.
  rmSync(join(clone, '.ratchet-data'), { recursive: true, force: true });
  const onPostgres = await startRatchet(
    {
      DATABASE_URL: inject('postgresUrl'),
      DATABASE_SCHEMA: `rt_clone_${Date.now().toString(36)}`,
      WEBHOOK_SIGNING_SECRETS: '',
      RATCHET_API_TOKEN: '',
    },
    { cwd: clone },
  );
  expect((await fetch(`${onPostgres.url}/healthz`)).status).toBe(200);
  expect(readdirSync(join(clone, '.ratchet-data')).sort()).toEqual(['api-token', 'dev-webhook-secret']);
  await onPostgres.stop();
});

/** The README's tour, as written, beside the running `npm start` (its port put where the README says 3000). */
async function tour(url: string): Promise<void> {
  const readme = readFileSync(join(clone, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## A two-minute tour'), readme.indexOf('## Use it from your app'));
  const port = new URL(url).port;
  const env = { ...process.env, PORT: port, RATCHET_API_TOKEN: '', WEBHOOK_SIGNING_SECRETS: '', npm_config_loglevel: 'error' };

  // 1. The demo, beside npm start: on a port of its own, its three links printed.
  expect(section).toContain('**1. Watch the race: `npm run demo`.**');
  const demo = await startRatchet({ PORT: '', RATCHET_API_TOKEN: '' }, { command: ['npm', 'run', 'demo'], cwd: clone });
  try {
    await eventually(() => demo.output().includes('Done:'), 60_000, 'the end of the demo');
    expect(demo.url).not.toBe(url);
    for (const link of ['Console (this link signs you in, once): ', 'The race in the console', 'Every job, once signed in: '])
      expect(demo.output()).toContain(link);
  } finally {
    await demo.stop('SIGINT');
  }

  // 3. Each command of the tour's shell block, in order, doing what its comment says.
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] as string;
  const lines = block.trim().split('\n');
  expect(lines.length).toBeGreaterThanOrEqual(4);
  const outputs: string[] = [];
  for (const line of lines) {
    const command = line.replace(/\s+#.*$/, '').replaceAll('127.0.0.1:3000', `127.0.0.1:${port}`);
    const { stdout } = await run('bash', ['-c', command], { cwd: clone, env });
    outputs.push(stdout);
  }
  expect(lines[1]).toContain('# SUCCEEDED, version 1');
  expect(JSON.parse(outputs[1] as string)).toMatchObject({ name: 'batches/123', state: 'SUCCEEDED', version: 1 });
  expect(lines[3]).toContain('"reason":"duplicate"');
  expect(outputs[3]).toContain('"reason":"duplicate"');

  // A new sign-in link, as step 2 says.
  expect(section).toContain('`npm run login` prints a new');
  const { stdout } = await run('npm', ['run', '--silent', 'login'], { cwd: clone, env });
  expect(stdout).toMatch(new RegExp(`^Console: http://127.0.0.1:${port}/login\\?code=\\S+ \\(signs in once, within 15 minutes\\)`));
}
