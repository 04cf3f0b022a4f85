/**
 * Runs `npm start` as a user would, in its own process group, and waits for
 * its ready line.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

export const PROJECT_ROOT = resolve(import.meta.dirname, '..', '..');

export interface RatchetProcess {
  url: string;
  /** The embedded engine's SQLite file (or `:memory:`). */
  dataFile: string;
  devSecret?: string;
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
    env: { ...process.env, PORT: '0', POWERTOOLS_LOG_LEVEL: 'WARN', ...env },
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
  return {
    url: ready[1] as string,
    dataFile: ready[2] as string,
    devSecret: output.match(/\b(whsec_\S+)/)?.[1],
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
