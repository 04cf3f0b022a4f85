/**
 * The runtime's side of SQLite's derived-work process (derived-supervisor.ts)
 * when that process dies under it: a message sent to it after its death and
 * before the runtime has seen the channel close (the window a `kill -9` opens,
 * wide on a loaded machine) must fail that one request, not the runtime. An
 * `error` event with no listener took the whole runtime down (exit 1), which
 * is how test/e2e/crash.test.ts "kill -9 of the effects process alone" timed
 * out: its senders retried a runtime that was gone.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Engine } from '../../app/engine.ts';
import { openSqlite } from '../../engines/sqlite/index.ts';
import { eventually } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-supervisor-'));
let engine: Engine | undefined;
afterAll(async () => {
  await engine?.close(false);
  rmSync(dataDir, { recursive: true, force: true });
});

/** This process's derived-work child, by `ps`. */
function derivedProcess(): number | undefined {
  const listing = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(process.pid)]).toString();
  const line = listing.split('\n').find((l) => l.includes('derived-process'));
  return line ? Number(line.trim().split(/\s+/)[0]) : undefined;
}

/**
 * Blocks this thread (no event loop turn) until `pid` is dead with its channel's end closed: a zombie not yet
 * reaped, and none of its threads left (its files are closed with its last thread, which can outlive the main one).
 */
function blockUntilDead(pid: number): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  for (let waited = 0; waited < 5_000; waited += 5) {
    // /proc/<pid>/stat: "pid (comm) state …"
    const zombie = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .startsWith('Z');
    if (zombie && readdirSync(`/proc/${pid}/task`).length === 1) return;
    Atomics.wait(pause, 0, 0, 5);
  }
  throw new Error(`process ${pid} did not die`);
}

describe('the derived-work process killed under the runtime', () => {
  it('a request sent into its closed channel fails alone; it is started again and answers; a stop sent so closes', async () => {
    engine = openSqlite({
      dataDir,
      work: { historyRetentionDays: 7, changesRetentionMs: 86_400_000 },
      trackedExpiryDays: 7,
      logger: silentLogger,
    });
    await engine.start();
    const redrive = () => (engine as Engine).redrive?.({}) as Promise<unknown>;
    /** What a redrive came to, in words (here, with effects off, the child's refusal: it answered). */
    const answered = async () => String(await redrive().catch((error: Error) => error.message));
    // The child answers (effects are off here: it says so), so it is up and its channel open.
    await eventually(async () => /effects are off/.test(await answered()), 30_000, 'started');
    const first = derivedProcess() as number;
    expect(first).toBeGreaterThan(0);

    process.kill(first, 'SIGKILL');
    blockUntilDead(first);
    // Its channel is closed, and this process has not turned its event loop to see it: the send meets EPIPE.
    await expect(redrive()).rejects.toThrow(/effects process/);

    await eventually(
      async () => {
        const now = derivedProcess();
        return now !== undefined && now !== first && /effects are off/.test(await answered());
      },
      30_000,
      'started again, answering',
    );

    // Stopped in the same window: the stop is sent into the closed channel, and the engine closes all the same.
    const second = derivedProcess() as number;
    process.kill(second, 'SIGKILL');
    blockUntilDead(second);
    await (engine as Engine).close(false);
    engine = undefined;
  });
});
