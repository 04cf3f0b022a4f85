/** The bench's servers: each its own process, started until its ready line, stopped with SIGTERM. */
import { type ChildProcess, spawn } from 'node:child_process';

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
