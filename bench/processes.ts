/** The bench's servers: each its own process, started until its ready line, stopped with SIGTERM. */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Started {
  url: string;
  child: ChildProcess;
  readyMs: number;
}

/** Spawns a server and waits for the line that gives its URL. */
export function startProcess(command: string[], env: Record<string, string>, ready: RegExp, cwd: string): Promise<Started> {
  const started = performance.now();
  const [file, ...args] = command as [string, ...string[]];
  const child = spawn(file, args, {
    cwd,
    env: { ...process.env, POWERTOOLS_LOG_LEVEL: 'ERROR', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const look = (chunk: Buffer) => {
      output += chunk;
      const match = output.match(ready);
      if (match) resolve({ url: match[1] as string, child, readyMs: performance.now() - started });
    };
    child.stdout?.on('data', look);
    child.stderr?.on('data', look);
    child.once('exit', (code) => reject(new Error(`${command.join(' ')} exited ${code}:\n${output}`)));
  });
}

export async function stopProcess(started: Started): Promise<void> {
  if (started.child.exitCode !== null) return;
  const exited = new Promise((resolve) => started.child.once('exit', resolve));
  started.child.kill('SIGTERM');
  await exited;
}

/** The load generator (load-generator.ts) as a process of its own, asked one thing at a time. */
export interface Generator {
  play(
    url: string,
    secret: string,
    prefix: string,
    size: number,
    mix: number,
    concurrency?: number,
  ): Promise<import('./load-generator.ts').Played>;
  offer(url: string, secret: string, prefix: string, rate: number, count: number): Promise<import('./load-generator.ts').Offered>;
  stop(): void;
}

export function startGenerator(root: string): Generator {
  const child = fork(join(root, 'bench/load-generator.ts'), [], { execArgv: ['--import', 'tsx'], cwd: root, stdio: 'inherit' });
  let queue: Promise<unknown> = Promise.resolve();
  const ask = <T>(request: import('./load-generator.ts').GeneratorRequest): Promise<T> => {
    const asked = queue.then(
      () =>
        new Promise<T>((resolve, reject) => {
          child.once('message', (reply: { ok: boolean; answer?: T; message?: string }) =>
            reply.ok ? resolve(reply.answer as T) : reject(new Error(`load generator: ${reply.message}`)),
          );
          child.send(request);
        }),
    );
    queue = asked.catch(() => undefined);
    return asked;
  };
  return {
    play: (url, secret, prefix, size, mix, concurrency) => ask({ type: 'play', url, secret, prefix, size, mix, concurrency }),
    offer: (url, secret, prefix, rate, count) => ask({ type: 'offer', url, secret, prefix, rate, count }),
    stop: () => child.kill(),
  };
}

/** Resident memory of a process, in MB (Linux). */
export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(status.match(/VmRSS:\s+(\d+)/)?.[1] ?? Number.NaN) / 1024;
}

/** CPU time a process has used, user and system, in ms (Linux: /proc/<pid>/stat, in clock ticks of 10 ms). */
export function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** CPU time of a process and the children it reaped (ended and waited for), user and system, in ms. */
function cpuWithEndedChildrenMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) * 10;
}

/**
 * CPU time of a process tree, in ms: the runtime and its derived-work
 * process, or PostgreSQL's postmaster and its backends. Children that ended
 * count too (in their parent's reaped time): a backend whose connection
 * closed mid-measurement does not take its CPU with it.
 */
export function treeCpuMs(pid: number): number {
  return [pid, ...childrenOf(pid)].reduce((sum, one) => {
    try {
      return sum + cpuWithEndedChildrenMs(one);
    } catch {
      return sum; // ended between the listing and the read: its parent's reaped time has it from now on
    }
  }, 0);
}

/**
 * Waits (at most `capMs`) until a process tree has gone 200 ms using less than
 * one clock tick of CPU: the work a load left behind (effects, history) is done.
 */
export async function settled(pid: number, capMs = 5_000): Promise<void> {
  const deadline = Date.now() + capMs;
  for (let before = treeCpuMs(pid); Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const now = treeCpuMs(pid);
    if (now - before <= 10) return;
    before = now;
  }
}

/** The children of a process (Linux): the runtime's derived-work process. */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
