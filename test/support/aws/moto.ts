/**
 * moto's server (Apache-2.0, `pip install "moto[server]"`): DynamoDB with
 * Streams, SQS FIFO, Secrets Manager, CloudFormation and STS on one loopback
 * port, for the AWS-path tests. One per test run (the global setup), in
 * memory; every request from these tests carries the same dummy credentials,
 * so all of them see one account (123456789012) in us-east-1.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { CloudFormationClient, CreateStackCommand } from '@aws-sdk/client-cloudformation';

export const MOTO_REGION = 'us-east-1';
export const MOTO_ACCOUNT = '123456789012';
/** What every client of these tests signs with (moto checks nothing). */
export const MOTO_CREDENTIALS = { accessKeyId: 'local', secretAccessKey: 'local' };

/**
 * moto quirk (5.2.1): an UpdateItem that creates an item emits two INSERT
 * stream records, first one whose NewImage holds only the key, then the real
 * one; DynamoDB emits the real one only. The tests' stream readers pass over
 * the first (pinned in test/integration/moto-quirks.test.ts).
 *
 * And: a stream numbers a record by the count of records before it, read
 * without a lock, so writes to one table at the same moment can share a
 * sequence number, and a reader paging by sequence number then misses or
 * repeats records. A test that counts a stream's records writes that table
 * one request at a time (test/integration/aws-partitions.test.ts).
 */
export function isMotoKeyOnlyInsert(record: { eventName?: string; dynamodb?: { Keys?: object; NewImage?: object } }): boolean {
  const keys = Object.keys(record.dynamodb?.Keys ?? {});
  const image = Object.keys(record.dynamodb?.NewImage ?? {});
  return record.eventName === 'INSERT' && image.length === keys.length && image.every((attribute) => keys.includes(attribute));
}

export class MotoMissingError extends Error {
  override name = 'MotoMissingError';
  constructor() {
    super('python3 cannot import moto.server: pip install "moto[server]" (.ci/run does)');
  }
}

export interface Moto {
  endpoint: string;
  child: ChildProcess;
  /** Dates the Secrets Manager versions stored from now on `offsetSeconds` away from now (see moto_server.py). */
  setSecretsManagerClock(offsetSeconds: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startMoto(): Promise<Moto> {
  if (spawnSync('python3', ['-c', 'import moto.server, werkzeug'], { stdio: 'ignore' }).status !== 0) throw new MotoMissingError();
  const port = await freePort();
  const endpoint = `http://127.0.0.1:${port}`;
  // moto_server, but with DynamoDB requests one at a time (see moto_server.py).
  const child = spawn('python3', [join(import.meta.dirname, 'moto_server.py'), '127.0.0.1', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-4000);
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`moto_server exited with ${child.exitCode}:\n${stderr}`);
    try {
      if ((await fetch(`${endpoint}/moto-api/`)).ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`moto_server did not answer on ${endpoint} within 30 s:\n${stderr}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    endpoint,
    child,
    async setSecretsManagerClock(offsetSeconds) {
      const response = await fetch(`${endpoint}/ratchet/secretsmanager-clock?offset=${offsetSeconds}`, { method: 'POST' });
      if (response.status !== 204) throw new Error(`moto_server.py did not set the clock: HTTP ${response.status}`);
    },
    async stop() {
      process.off('exit', killOnExit);
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 5_000))]);
      child.kill('SIGKILL');
    },
  };
}

/**
 * A stack in moto's CloudFormation holding only `outputs`, which is all
 * `npm run connect` and `npm run aws -- redrive --stack` read of a deployed stack.
 */
export async function publishStackOutputs(endpoint: string, stackName: string, outputs: Record<string, string>): Promise<void> {
  const template = {
    Resources: { Placeholder: { Type: 'AWS::CloudFormation::WaitConditionHandle' } },
    Outputs: Object.fromEntries(Object.entries(outputs).map(([key, value]) => [key, { Value: value }])),
  };
  const cloudformation = new CloudFormationClient({ endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  try {
    await cloudformation.send(new CreateStackCommand({ StackName: stackName, TemplateBody: JSON.stringify(template) }));
  } finally {
    cloudformation.destroy();
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}
