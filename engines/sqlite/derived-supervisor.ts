/**
 * The runtime's side of its derived-work process (derived-work.ts,
 * derived-child.ts): forks it, wakes it after commits, asks it to redrive,
 * and starts it again when it dies (`kill -9` included: what it had not
 * committed waits in the outbox and the effects queue, and is done then,
 * once, in order). The runtime does not wait for it to be up: it listens at
 * once, and the first drain takes whatever was committed meanwhile.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { RedriveOptions } from '../../app/effects/redrive.ts';
import type { Telemetry } from '../../app/telemetry.ts';
import type { DerivedWork, DerivedWorkOptions, RedriveResult } from './derived-work.ts';

/** Messages between the runtime and its derived-work process. */
export type ToChild =
  | { type: 'start'; dbFile: string; options: DerivedWorkOptions }
  | { type: 'wake' }
  | { type: 'redrive'; id: number; options: RedriveOptions }
  | { type: 'stop' };
export type ToParent =
  | { type: 'ready' }
  | { type: 'effect'; sink: string; lagSeconds: number }
  | { type: 'redriven'; id: number; result: RedriveResult }
  | { type: 'redrive-failed'; id: number; message: string };

const RESTART_MS = 500;
const RESTART_CAP_MS = 30_000;

/** The derived work in a child process on `dbFile`, restarted when it dies (after 0.5 s, doubling to 30 s while it keeps dying at start). */
export function startDerivedProcess(
  dbFile: string,
  options: DerivedWorkOptions,
  logger: Logger,
  telemetry?: Telemetry,
  /** The process's entry (the front end's, which traces), else this engine's own. */
  entry?: URL,
): DerivedWork {
  const script = entry ?? derivedProcessScript();
  // In a checkout the script is TypeScript: run through the checkout's tsx, whatever the working directory.
  const execArgv = script.pathname.endsWith('.ts') ? ['--import', import.meta.resolve('tsx')] : [];
  let child: ChildProcess | undefined;
  let stopping = false;
  let restartMs = RESTART_MS;
  let wakePending = false;
  let nextId = 0;
  const waiting = new Map<number, { resolve: (r: RedriveResult) => void; reject: (e: Error) => void }>();

  /**
   * `message` to `one`, or `lost` called. Between its death and the moment this process reads that its channel
   * closed (the next turn of the event loop, later on a loaded machine) `connected` still says true, and a send
   * meets EPIPE. Without a callback Node emits that as an `error` event, which nothing here listened to: an
   * uncaught exception, the runtime gone (a `kill -9` of this process alone took the webhook down with it). The
   * exit handler restarts the process; a message lost meanwhile is a wake its restart repeats, or a redrive
   * refused.
   */
  const sendTo = (one: ChildProcess, message: ToChild, lost: (error: Error) => void = () => {}) => {
    if (!one.connected) return lost(new Error('the effects process is restarting; try again in a moment'));
    one.send(message, (error: Error | null) => {
      if (error) lost(new Error(`the effects process is restarting; try again in a moment (${error.message})`));
    });
  };

  const spawnChild = () =>
    new Promise<void>((ready, failed) => {
      const started = Date.now();
      const one = fork(fileURLToPath(script), [], {
        execArgv,
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        serialization: 'json',
      });
      child = one;
      // A failure to signal or to spawn it, said; its exit (if any) restarts it. Sends carry their own callback.
      one.on('error', (error) => logger.error('effects process: its channel or signal failed', { error: error.message }));
      // The configuration travels by the channel, not the environment: it holds the effects secret.
      sendTo(one, { type: 'start', dbFile, options });
      one.on('message', (message: ToParent) => {
        if (message.type === 'ready') {
          ready();
          // A change committed while it was starting: its first drain takes it anyway, but wake it to be sure.
          sendTo(one, { type: 'wake' });
          return;
        }
        // Its deliveries count here, where /metrics is served.
        if (message.type === 'effect') return telemetry?.effect(message.sink, message.lagSeconds);
        const request = waiting.get(message.id);
        waiting.delete(message.id);
        if (message.type === 'redriven') request?.resolve(message.result);
        else request?.reject(new Error(message.message));
      });
      one.once('exit', (code, signal) => {
        if (child === one) child = undefined;
        for (const [id, request] of waiting) {
          waiting.delete(id);
          request.reject(new Error('the effects process stopped before it answered'));
        }
        if (stopping) return;
        failed(new Error(`the effects process exited (${signal ?? code}) before it was ready`));
        // 0.5 s, then doubling while it keeps dying soon after its start; 0.5 s again after a long life.
        const delayMs = Date.now() - started > RESTART_CAP_MS ? RESTART_MS : restartMs;
        restartMs = Math.min(RESTART_CAP_MS, delayMs * 2);
        logger.error('effects process exited; restarting it (its work waits in the outbox and the effects queue)', {
          code,
          signal,
          restartInMs: delayMs,
        });
        setTimeout(() => {
          if (!stopping) spawnChild().catch(() => undefined);
        }, delayMs).unref();
      });
    });

  spawnChild().catch(() => undefined); // its exit handler restarts it
  return {
    wake: () => {
      // One message per turn of the event loop, however many commits it saw.
      if (wakePending) return;
      wakePending = true;
      setImmediate(() => {
        wakePending = false;
        if (child) sendTo(child, { type: 'wake' });
      });
    },
    redrive: (options) =>
      new Promise((resolve, reject) => {
        if (!child?.connected) return reject(new Error('the effects process is restarting; try again in a moment'));
        const id = ++nextId;
        waiting.set(id, { resolve, reject });
        sendTo(child, { type: 'redrive', id, options }, (error) => {
          waiting.delete(id);
          reject(error);
        });
      }),
    stop: async () => {
      stopping = true;
      const last = child;
      if (!last || last.exitCode !== null) return;
      const exited = new Promise((resolve) => last.once('exit', resolve));
      sendTo(last, { type: 'stop' }); // one whose channel closed ends by itself (or by the kill below)
      const killer = setTimeout(() => last.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** derived-process.ts beside this file in a checkout; the package's own `derived-process.js` entry once built. */
function derivedProcessScript(): URL {
  if (import.meta.url.endsWith('.ts')) return new URL('./derived-process.ts', import.meta.url);
  for (const candidate of ['./derived-process.js', '../derived-process.js']) {
    const url = new URL(candidate, import.meta.url);
    if (existsSync(url)) return url;
  }
  throw new Error('derived-process.js is missing from this installation');
}
