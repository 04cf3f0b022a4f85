/**
 * Runs `npm start` as a user would, in its own process group, and waits for
 * its ready line.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { eventually } from './receiver.ts';

export const PROJECT_ROOT = resolve(import.meta.dirname, '..', '..');

/** The API token test servers get unless a test sets RATCHET_API_TOKEN itself ('' to have one generated). */
export const TEST_API_TOKEN = 'test-api-token-0123456789abcdef';

/** fetch on a Ratchet's API, with its token. */
export type ApiFetch = (path: string, init?: RequestInit) => Promise<Response>;

export function apiOf(ratchet: { url: string; apiToken?: string }): ApiFetch {
  return (path, init = {}) =>
    fetch(`${ratchet.url}${path}`, {
      ...init,
      headers: { ...(ratchet.apiToken && { authorization: `Bearer ${ratchet.apiToken}` }), ...(init.headers as Record<string, string>) },
    });
}

export interface RatchetProcess {
  url: string;
  /** The embedded engine's SQLite file (or `:memory:`). */
  dataFile: string;
  devSecret?: string;
  /** The API token it accepts: the test's RATCHET_API_TOKEN, or the one it generated into its data folder. */
  apiToken?: string;
  /** fetch on its API, with that token. */
  api: ApiFetch;
  child: ChildProcess;
  output(): string;
  /** Signals the process group (SIGINT is what a terminal's Ctrl-C sends) and waits until all of it is gone. */
  stop(signal?: 'SIGINT' | 'SIGTERM'): Promise<void>;
}

export interface StartOptions {
  command?: string[];
  /** The checkout to run in (default: this one). */
  cwd?: string;
  readyWithinMs?: number;
}

export async function startRatchet(env: Record<string, string>, options: StartOptions = {}): Promise<RatchetProcess> {
  const { command = ['npm', 'start'], cwd = PROJECT_ROOT, readyWithinMs = 45_000 } = options;
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, {
    cwd,
    env: { ...process.env, PORT: '0', POWERTOOLS_LOG_LEVEL: 'WARN', RATCHET_API_TOKEN: TEST_API_TOKEN, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const ready = await Promise.race([
    new Promise<RegExpMatchArray>((done) => {
      const check = () => {
        const match = output.match(/Ratchet ready at (http:\/\/\S+) .*data: ([^\s)]+)\)/);
        if (match) done(match);
        else setTimeout(check, 50);
      };
      check();
    }),
    exited.then((code) => {
      throw new Error(`npm start exited with ${code} before it was ready:\n${output}`);
    }),
    new Promise<never>((_, reject) =>
      setTimeout(() => reject(new Error(`not ready after ${readyWithinMs} ms:\n${output}`)), readyWithinMs),
    ),
  ]);
  const url = ready[1] as string;
  const fileNamed = (pattern: RegExp) => {
    const file = output.match(pattern)?.[1];
    return file ? readFileSync(file, 'utf8').trim() : undefined;
  };
  const tokenFromEnv = (env.RATCHET_API_TOKEN ?? TEST_API_TOKEN).split(/[\s,]+/).find(Boolean);
  const apiToken = tokenFromEnv ?? fileNamed(/Bearer <the token in (\S+)>/);
  return {
    url,
    dataFile: ready[2] as string,
    devSecret: fileNamed(/the development secret in (\S+) are accepted/),
    apiToken,
    api: apiOf({ url, ...(apiToken && { apiToken }) }),
    child,
    output: () => output,
    stop: async (sig = 'SIGINT') => {
      const group = -(child.pid as number);
      if (!signal(group, sig)) return;
      await exited;
      for (let waited = 0; signal(group, 0); waited += 50) {
        if (waited > 15_000) {
          const left = spawnSync('ps', ['-o', 'pid,stat,args', '-g', String(child.pid)]).stdout.toString();
          throw new Error(`npm start left processes behind:\n${left}\n${output.slice(-3_000)}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
  };
}

/**
 * Resolves once each of `providers` has logged a discovery sweep ("batch
 * discovery swept": INFO, or WARN where it adopted a batch). The first sweep
 * starts with the instance and may still be listing when the ready line is
 * out: a batch a test sets at a provider's fake before that sweep is over can
 * be adopted before the test tracks it, whose track then answers 200, not 201.
 * The next sweep is an hour later.
 */
export async function firstSweepDone(ratchet: RatchetProcess, providers: string[], timeoutMs = 20_000): Promise<void> {
  const lines = () => ratchet.output().split('\n');
  const swept = (provider: string) =>
    lines().some((line) => line.includes('"batch discovery swept"') && line.includes(`"provider":"${provider}"`));
  await eventually(() => providers.every(swept), timeoutMs, `the first discovery sweep of ${providers.join(' and ')}`);
}

/** Runs a command to its end, for start-up failures. */
export function runToExit(command: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (c) => {
    output += c;
  });
  child.stderr?.on('data', (c) => {
    output += c;
  });
  return new Promise((done) => child.once('exit', (code) => done({ code, output })));
}

/** Sends a signal; false when no such process (group) exists any more. */
function signal(pid: number, sig: NodeJS.Signals | 0): boolean {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
}

/** SIGKILL to a started process's whole group (npm, its shell, node), then wait until none of it is left. */
export async function killHard(started: RatchetProcess): Promise<void> {
  const group = -(started.child.pid as number);
  process.kill(group, 'SIGKILL');
  for (;;) {
    try {
      process.kill(group, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
