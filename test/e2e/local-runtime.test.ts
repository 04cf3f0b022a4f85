/**
 * `npm start` tried as a new user would: real HTTP, the embedded engine on a
 * SQLite file, signed Gemini deliveries; then a restart, a second process on
 * the same folder, a folder from another version, no java.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DB_FILE, DYNAMODB_LOCAL_FILE } from '../../engines/sqlite/data-folder.ts';
import { SCHEMA_VERSION } from '../../engines/sqlite/schema.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { withConnection } from '../support/engine-file.ts';
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
  const response = await ratchet.api(`/operations/${name}`);
  return { status: response.status, body: await response.json() };
};

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
    expect(ratchet.output()).toContain('reconcile off: no provider has a credential here');
    expect((await fetch(`${ratchet.url}/healthz`)).status).toBe(200);
  });

  it('applies signed deliveries and answers stale and duplicate ones with 200 and no change', async () => {
    const running = await post(ratchet.url, '/operations', JSON.stringify({ name: 'batch_e2e' }), {
      'content-type': 'application/json',
      authorization: `Bearer ${ratchet.apiToken}`,
    });
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
    const listed = (await (await ratchet.api(`/operations?kind=batch&state=SUCCEEDED`)).json()) as {
      operations: Array<{ name: string }>;
    };
    expect(listed.operations.map((o) => o.name)).toContain('batches/e2e');
    const history = async () =>
      ((await (await ratchet.api(`/operations/batches/e2e/history`)).json()) as { history: Array<Record<string, unknown>> }).history;
    await eventually(async () => (await history()).length === 2, 15_000, 'history from the stream');
    expect((await history()).map((e) => [e.version, e.previousState, e.state, e.source, e.eventId])).toEqual([
      [1, null, null, 'track', null],
      [2, null, 'SUCCEEDED', 'webhook', 'msg_done'],
    ]);
  });

  it('answers 401 for a bad signature or a stale timestamp, 200 unprocessable for a malformed body, 413 when oversize, 200 for unknown types', async () => {
    const payload = envelope('batch.failed', { id: 'batches/e2e-bad' });
    expect((await deliver(payload, { secret: newSecret() })).status).toBe(401);
    expect((await deliver(payload, { timestamp: Math.floor(Date.now() / 1000) - 301 })).status).toBe(401);
    // Authentic but never usable: 200, so Gemini neither retries it for a day nor switches the webhook off.
    expect(await deliver('{"type": "batch.failed", "data": ')).toMatchObject({ status: 200, body: { reason: 'unprocessable' } });
    expect(await deliver(envelope('batch.failed', { id: 'batches/e2e-bad' }, '2026-13-45T99:00:00Z'))).toMatchObject({
      status: 200,
      body: { reason: 'unprocessable' },
    });
    expect((await deliver(envelope('batch.failed', { id: 'batches/e2e-bad', pad: 'x'.repeat(256 * 1024) }))).status).toBe(413);
    expect(await deliver({ type: 'webhook.ping', timestamp: '2026-11-30T10:00:00Z' })).toEqual({
      status: 200,
      body: { applied: false, reason: 'unknown-event-type' },
    });
    expect((await read('batches/e2e-bad')).status).toBe(404);
  });

  it('keeps data across a restart, and leaves nothing running on SIGTERM', async () => {
    expect(ratchet.dataFile).toBe(join(dataDir, DB_FILE));
    await ratchet.stop('SIGTERM'); // waits until no process of its group is left
    expect(ratchet.output()).toContain('Ratchet stopping (SIGTERM)');
    ratchet = await startRatchet({ DATA_DIR: dataDir, WEBHOOK_SIGNING_SECRETS: '' });
    expect(await read('batches/e2e')).toMatchObject({ status: 200, body: { state: 'SUCCEEDED', version: 2 } });
  });

  it('refuses a second process on the same data folder with one line naming the holder; the first goes on', async () => {
    const { code, output } = await startOn(dataDir);
    expect(code).toBe(1);
    expect(output.trim().split('\n')).toEqual([
      `ratchet: ${dataDir} is in use by another Ratchet (pid ${readHolder().pid}, ${ratchet.url}, since ${readHolder().since}); stop it, or set DATA_DIR to another folder`,
    ]);
    expect(await read('batches/e2e')).toMatchObject({ status: 200, body: { state: 'SUCCEEDED', version: 2 } });
    expect((await deliver(envelope('batch.succeeded', { id: 'batches/after-refusal' }))).status).toBe(200);
  });
});

/** The runtime started on `dir` as a plain process, to its end (for starts that must refuse). */
const startOn = (dir: string) =>
  runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/start.ts')], {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '/tmp',
    DATA_DIR: dir,
    PORT: '0',
    POWERTOOLS_LOG_LEVEL: 'ERROR',
  });

const readHolder = () => JSON.parse(readFileSync(join(dataDir, 'ratchet.pid'), 'utf8')) as { pid: number; since: string };

describe('npm start on a data folder from another version', () => {
  it('names what the DynamoDB Local runtime left, leaves it as it is, and starts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ratchet-old-'));
    writeFileSync(join(dir, DYNAMODB_LOCAL_FILE), 'old data');
    const old = await startRatchet({ DATA_DIR: dir, WEBHOOK_SIGNING_SECRETS: '', POWERTOOLS_LOG_LEVEL: 'WARN' });
    try {
      const line = old
        .output()
        .split('\n')
        .find((l) => l.includes(DYNAMODB_LOCAL_FILE));
      expect(JSON.parse(line ?? '{}').message).toBe(
        `${join(dir, DYNAMODB_LOCAL_FILE)} holds data of the DynamoDB Local runtime (before the embedded engine); it is left as it is and not read`,
      );
      expect(readFileSync(join(dir, DYNAMODB_LOCAL_FILE), 'utf8')).toBe('old data');
    } finally {
      await old.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses a file from a newer schema with one line, and changes nothing in it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ratchet-newer-'));
    try {
      withConnection(join(dir, DB_FILE), (db) => db.connection.exec(`PRAGMA user_version = ${SCHEMA_VERSION + 1}`));
      const { code, output } = await startOn(dir);
      expect(code).toBe(1);
      expect(output.trim().split('\n')).toEqual([
        `ratchet: ${join(dir, DB_FILE)} has schema version ${SCHEMA_VERSION + 1}, written by a newer Ratchet (this one knows up to ${SCHEMA_VERSION}); run that version, or set DATA_DIR to another folder`,
      ]);
      expect(withConnection(join(dir, DB_FILE), (db) => db.all("SELECT name FROM sqlite_master WHERE type = 'table'"))).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('npm start without java', () => {
  it('reaches its ready line with nothing but node on the PATH', async () => {
    const bin = mkdtempSync(join(tmpdir(), 'ratchet-nojava-'));
    symlinkSync(process.execPath, join(bin, 'node'));
    const dir = mkdtempSync(join(tmpdir(), 'ratchet-nojava-data-'));
    try {
      const plain = await startRatchet(
        { PATH: bin, DATA_DIR: dir, WEBHOOK_SIGNING_SECRETS: '' },
        { command: [process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/start.ts')] },
      );
      expect((await fetch(`${plain.url}/healthz`)).status).toBe(200);
      expect(existsSync(join(dir, DB_FILE))).toBe(true);
      await plain.stop();
    } finally {
      rmSync(bin, { recursive: true, force: true });
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
