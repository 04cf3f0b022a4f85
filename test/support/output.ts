/** What a child process wrote, stdout and stderr together, as it comes: `output()` reads it so far. */
import type { ChildProcess } from 'node:child_process';

export function collectOutput(child: ChildProcess): () => string {
  let output = '';
  const append = (chunk: Buffer | string) => {
    output += chunk;
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  return () => output;
}
