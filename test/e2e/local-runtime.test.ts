/**
 * `npm start` tried as a new user would: real HTTP, the embedded DynamoDB
 * Local, signed Gemini deliveries; then a restart, a store outage, no java.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startDynamoDbLocal } from '../../local/dynamodb-local.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { PROJECT_ROOT, type RatchetProcess, runToExit, startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-e2e-'));
let ratchet: RatchetProcess;

async function post(url: string, path: string, body: string, headers: Record<string, string>) {
  const response = await fetch(`${url}${path}`, { method: 'POST', body, headers });
  return { status: response.status, body: await response.json() };
}

function deliver(payload: unknown, options: { id?: string; timestamp?: number; secret?: string } = {}) {
  const { body, headers } = signedDelivery(options.secret ?? (ratchet.devSecret as string), payload, options);
  return post(ratchet.url, '/webhooks/gemini', body, headers);
}

const read = async (name: string) => {
  const response = await fetch(`${ratchet.url}/operations/${name}`);
  return { status: response.status, body: await response.json() };
};

function javaRunningFor(dir: string): boolean {
  try {
    return (
      execFileSync('pgrep', ['-f', `DynamoDBLocal.jar.*${dir}`])
        .toString()
        .trim().length > 0
    );
  } catch {
    return false;
  }
}

beforeAll(async () => {
  ratchet = await startRatchet({ DATA_DIR: dataDir, WEBHOOK_SIGNING_SECRETS: '' });
});

afterAll(async () => {
  await ratchet?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start', () => {
  it('prints a development secret when none is configured, and serves healthz', async () => {
    expect(ratchet.devSecret).toMatch(/^whsec_[A-Za-z0-9+/=]+$/);
    expect(ratchet.output()).toContain('reconcile off: GEMINI_API_KEY is not set');
    expect((await fetch(`${ratchet.url}/healthz`)).status).toBe(200);
  });

  it('applies signed deliveries and answers stale and duplicate ones with 200 and no change', async () => {
    const running = await post(ratchet.url, '/operations', JSON.stringify({ name: 'batch_e2e' }), { 'content-type': 'application/json' });
    expect(running.status).toBe(201);
    const done = await deliver(envelope('batch.succeeded', { id: 'batch_e2e', output_file_uri: 'files/out-1' }, '2026-11-30T10:00:00.5Z'), {
      id: 'msg_done',
    });
    expect(done).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name: 'batches/e2e', state: 'SUCCEEDED', version: 2 } },
    });

    expect(await deliver(envelope('batch.succeeded', { id: 'batches/e2e' }, '2026-11-30T10:00:00.5Z'), { id: 'msg_done' })).toMatchObject({
      status: 200,
      body: { applied: false, reason: 'duplicate' },
    });
    expect(await deliver(envelope('batch.succeeded', { id: 'batches/e2e' }, '2026-11-30T10:00:00Z'))).toMatchObject({
      status: 200,
      body: { applied: false, reason: 'stale-or-equal-update-time' },
    });
    expect(await deliver(envelope('batch.cancelled', { id: 'batches/e2e' }, '2026-11-30T11:00:00Z'))).toMatchObject({
      status: 200,
      body: { applied: false, reason: 'terminal-conflict' },
    });

    expect(await read('batches/e2e')).toMatchObject({
      status: 200,
      body: {
        name: 'batches/e2e',
        state: 'SUCCEEDED',
        providerState: 'batch.succeeded',
        updateTime: '2026-11-30T10:00:00.500000000Z',
        version: 2,
        result: { outputUri: 'files/out-1' },
      },
    });
  });

  it("lists what it holds and keeps each operation's history from the stream (GET /operations, …/history)", async () => {
    const listed = (await (await fetch(`${ratchet.url}/operations?kind=batch&state=SUCCEEDED`)).json()) as {
      operations: Array<{ name: string }>;
    };
    expect(listed.operations.map((o) => o.name)).toContain('batches/e2e');
    const history = async () =>
      ((await (await fetch(`${ratchet.url}/operations/batches/e2e/history`)).json()) as { history: Array<Record<string, unknown>> })
        .history;
    await eventually(async () => (await history()).length === 2, 15_000, 'history from the stream');
    expect((await history()).map((e) => [e.version, e.previousState, e.state, e.source, e.eventId])).toEqual([
      [1, null, null, 'track', null],
      [2, null, 'SUCCEEDED', 'webhook', 'msg_done'],
    ]);
  });

  it('answers 401 for a bad signature or a stale timestamp, 400 for a malformed body, 413 when oversize, 200 for unknown types', async () => {
    const payload = envelope('batch.failed', { id: 'batches/e2e-bad' });
    expect((await deliver(payload, { secret: newSecret() })).status).toBe(401);
    expect((await deliver(payload, { timestamp: Math.floor(Date.now() / 1000) - 301 })).status).toBe(401);
    expect((await deliver('{"type": "batch.failed", "data": ')).status).toBe(400);
    expect((await deliver(envelope('batch.failed', { id: 'batches/e2e-bad' }, '2026-13-45T99:00:00Z'))).status).toBe(400);
    expect((await deliver(envelope('batch.failed', { id: 'batches/e2e-bad', pad: 'x'.repeat(256 * 1024) }))).status).toBe(413);
    expect(await deliver({ type: 'webhook.ping', timestamp: '2026-11-30T10:00:00Z' })).toEqual({
      status: 200,
      body: { applied: false, reason: 'unknown-event-type' },
    });
    expect((await read('batches/e2e-bad')).status).toBe(404);
  });

  it('keeps data across a restart and leaves no java behind on SIGTERM', async () => {
    expect(javaRunningFor(dataDir)).toBe(true);
    await ratchet.stop('SIGTERM');
    expect(ratchet.output()).toContain('Ratchet stopping (SIGTERM)');
    expect(javaRunningFor(dataDir)).toBe(false);
    ratchet = await startRatchet({ DATA_DIR: dataDir, WEBHOOK_SIGNING_SECRETS: '' });
    expect(await read('batches/e2e')).toMatchObject({ status: 200, body: { state: 'SUCCEEDED', version: 2 } });
  });
});

describe('npm start against an external DynamoDB', () => {
  it('answers 503 while the store is down, so the sender retries', async () => {
    const db = await startDynamoDbLocal();
    const secret = newSecret();
    const external = await startRatchet({
      DYNAMODB_ENDPOINT: db.endpoint,
      WEBHOOK_SIGNING_SECRETS: secret,
      TABLE_NAME: 'ratchet-e2e-outage',
    });
    try {
      const send = (id: string) => {
        const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id }));
        return post(external.url, '/webhooks/gemini', body, headers);
      };
      expect((await send('batches/before-outage')).status).toBe(200);
      await db.stop();
      expect(await send('batches/during-outage')).toMatchObject({ status: 503, body: { error: 'not-recorded' } });
      expect((await fetch(`${external.url}/operations/batches/before-outage`)).status).toBe(503);
    } finally {
      await external.stop();
      await db.stop();
    }
  });

  it('shares the test DynamoDB and its table when DYNAMODB_ENDPOINT is set', async () => {
    const secret = newSecret();
    const shared = await startRatchet({
      DYNAMODB_ENDPOINT: inject('dynamodbEndpoint'),
      TABLE_NAME: inject('tableName'),
      WEBHOOK_SIGNING_SECRETS: secret,
    });
    try {
      expect(shared.devSecret).toBeUndefined();
      expect((await fetch(`${shared.url}/healthz`)).status).toBe(200);
    } finally {
      await shared.stop();
    }
  });
});

describe('npm start without java', () => {
  it('says what to install instead of printing a stack trace', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'ratchet-nojava-'));
    symlinkSync(process.execPath, join(bin, 'node'));
    try {
      const { code, output } = await runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/start.ts')], {
        PATH: bin,
        HOME: process.env.HOME ?? '/tmp',
        DATA_DIR: ':memory:',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      });
      expect(code).toBe(1);
      expect(output).toContain('DynamoDB Local needs Java 17 or newer');
      expect(output).toContain('openjdk-17-jre-headless');
      expect(output).not.toMatch(/\n\s+at /);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });
});
