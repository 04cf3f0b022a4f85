/**
 * `npm start` tried as an attacker and a careless operator would: the six
 * ways in which bad input once poisoned Ratchet, each reproduced through real
 * HTTP, the embedded engine's SQLite file, the outbound sink and a fake Gemini.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OperationRecord } from '../../core/reducer.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { withConnection } from '../support/engine-file.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { type RatchetProcess, runToExit, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const inbound = newSecret();
const outbound = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-hostile-'));
let receiver: Receiver;
let gemini: FakeGemini;
let ratchet: RatchetProcess;

beforeAll(async () => {
  receiver = await new Receiver(outbound).start();
  gemini = await new FakeGemini('hostile-key').start();
  ratchet = await startRatchet({
    DATA_DIR: dataDir,
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_RETRY_BASE_MS: '100',
    EFFECTS_RETRY_MAX_MS: '1000',
    GEMINI_API_KEY: gemini.apiKey,
    GEMINI_BASE_URL: gemini.baseUrl,
    RECONCILE_INTERVAL_SECONDS: '1',
  });
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  await gemini?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function deliver(body: string | object, id?: string) {
  const signed = signedDelivery(inbound, body, id ? { id } : {});
  const response = await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', ...signed });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const read = async (name: string) => {
  const response = await ratchet.api(`/operations/${name}`);
  return { status: response.status, body: (await response.json()) as OperationRecord & { error?: string } };
};

const track = (name: string, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
  ratchet.api(`/operations`, { method: 'POST', body: JSON.stringify({ name }), headers });

describe('1. names are resource names', () => {
  const tricks = ['batches/../x', 'batches/./x', 'batches/x/..', 'models/veo/operations/../../../files/x', 'batch_../files/x'];

  it('refuses . and .. segments on every route, and Gemini never hears of them', async () => {
    for (const name of tricks) {
      // An authentic delivery is answered 200 whatever it holds; it changes nothing and is kept as unprocessable.
      expect(await deliver(envelope('batch.failed', { id: name })), name).toMatchObject({ status: 200, body: { reason: 'unprocessable' } });
      expect((await track(name)).status, name).toBe(400);
      // One percent-encoded segment, so no client resolves the dots before Ratchet sees them.
      expect((await read(encodeURIComponent(name))).status, name).toBe(400);
    }
    // Polling runs every second; give it a few rounds.
    expect((await track('batches/honest')).status).toBe(201);
    await eventually(() => gemini.requests.includes('batches/honest'), 15_000, 'a poll of the honest name');
    // Beside the honest poll, only the lists of the webhook health check (`webhooks`) and of discovery (`batches`) may have been asked.
    expect(gemini.requests.filter((path) => !path.startsWith('batches/honest') && path !== 'webhooks' && path !== 'batches')).toEqual([]);
  });
});

describe('2. provider numbers the store cannot hold', () => {
  it.each(['1e200', '1e-200', '123456789012345678901234567890123456789', '9007199254740993'])(
    'a batch.failed whose error.code is %s is recorded (200), with the code as its exact text',
    async (code) => {
      const name = `batches/code-${code.length}-${code.slice(0, 4)}`;
      const body = JSON.stringify(envelope('batch.failed', { id: name, error: { code: 0, message: 'm' } })).replace(
        '"code":0',
        `"code":${code}`,
      );
      expect((await deliver(body)).status).toBe(200);
      expect((await read(name)).body).toMatchObject({ state: 'FAILED', result: { error: { code, message: 'm' } } });
    },
  );
});

describe('3. an empty map in a result, and a record that cannot be decoded', () => {
  it('delivers the effect of an error with only a status at once, and a poisoned record holds up nobody', async () => {
    // A change no decoder can read (version is not a number), written straight into the outbox, state-change and all.
    withConnection(ratchet.dataFile, (db) =>
      db.write(() =>
        db.run(
          "INSERT INTO changes (name, version, write_kind, old_record, new_record, at) VALUES ('batches/poison', 0, 'state-change', NULL, ?, ?)",
          JSON.stringify({ name: 'batches/poison', version: 'x' }),
          Date.now(),
        ),
      ),
    );
    expect((await deliver(envelope('batch.failed', { id: 'batches/status-only', error: { status: 'INTERNAL' } }))).status).toBe(200);
    expect((await deliver(envelope('batch.failed', { id: 'batches/empty-error', error: {} }))).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await deliver(envelope('batch.succeeded', { id: `batches/behind-${i}` }))).status).toBe(200);

    const names = ['batches/status-only', 'batches/empty-error', ...Array.from({ length: 5 }, (_, i) => `batches/behind-${i}`)];
    // Once, the poison held every effect up for minutes of retries; now it is set aside at once.
    await eventually(() => names.every((n) => receiver.applied().some((d) => d.body.data.name === n)), 15_000, 'every effect');
    const effect = receiver.applied().find((d) => d.body.data.name === 'batches/status-only');
    expect(effect?.body.data).toMatchObject({ state: 'FAILED', result: { error: { status: 'INTERNAL' } } });
    expect(receiver.applied().find((d) => d.body.data.name === 'batches/empty-error')?.body.data).toMatchObject({ result: { error: {} } });

    const { undecodable } = (await (await ratchet.api(`/effects/dead-letters`)).json()) as {
      undecodable: Array<{ name: string; reason: string; raw: string }>;
    };
    const letter = undecodable.find((item) => item.name === 'batches/poison');
    expect(letter).toMatchObject({ reason: expect.stringMatching(/is not an operation/) });
    // Kept as the queue held it: the write's record, raw.
    expect(JSON.parse(letter?.raw as string)).toEqual({ name: 'batches/poison', version: 'x' });
  });
});

describe('4. a rotation entry that looks right but does not decode', () => {
  it('stops npm start with its position, never its value', async () => {
    const { code, output } = await runToExit(['npm', 'start'], {
      ...process.env,
      PORT: '0',
      DATA_DIR: ':memory:',
      WEBHOOK_SIGNING_SECRETS: `whsec_abc ${newSecret()}`,
    } as Record<string, string>);
    expect(code).toBe(2);
    expect(output).toContain('WEBHOOK_SIGNING_SECRETS: its secret #1 is not of the form whsec_<base64>');
    expect(output).not.toContain('whsec_abc');
  });
});

describe('5. the store cannot be written mid-stream (another process holds its write lock past the busy timeout)', () => {
  it('answers 503, never 200 without a write; healthz is 503; after redelivery nothing is lost, every effect once, in order', async () => {
    const operations = Array.from({ length: 12 }, (_, i) => `interactions/kill-${i}`);
    const events = operations.flatMap((id) => [
      envelope('interaction.requires_action', { id }, '2026-11-30T10:00:01Z'),
      envelope('interaction.completed', { id }, '2026-11-30T10:00:02Z'),
    ]);
    const statuses = new Set<number>();
    let healthDuringGap: unknown;
    // As Gemini does: every delivery is retried until it is answered 200.
    const sendAll = async () => {
      for (const [i, event] of events.entries()) {
        const id = `msg-kill-${i}`;
        if (i === 7) {
          await withConnection(ratchet.dataFile, async (db) => {
            db.connection.exec('BEGIN IMMEDIATE');
            const during = await deliver(event, id);
            statuses.add(during.status);
            expect(during.status).toBe(503);
            await eventually(async () => (await fetch(`${ratchet.url}/healthz`)).status === 503, 10_000, 'healthz 503');
            healthDuringGap = await (await fetch(`${ratchet.url}/healthz`)).json();
            // Held a while longer: the outbox, the effects queue and reconcile all meet the lock and back off.
            await new Promise((resolve) => setTimeout(resolve, 2_000));
            db.connection.exec('ROLLBACK');
          });
        }
        for (;;) {
          const { status } = await deliver(event, id);
          statuses.add(status);
          if (status === 200) break;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
    };
    await sendAll();
    expect([...statuses].sort()).toEqual([200, 503]);
    expect(healthDuringGap).toEqual({
      status: 'degraded',
      store: 'unavailable',
      reason: expect.stringMatching(/^the data file does not take a write \(.+\)$/),
    });
    await eventually(async () => (await fetch(`${ratchet.url}/healthz`)).status === 200, 5_000, 'healthz 200 again');

    for (const name of operations) expect((await read(name)).body).toMatchObject({ state: 'SUCCEEDED', version: 2 });
    const ofKill = () => receiver.applied().filter((d) => d.body.data.name.includes('/kill-'));
    await eventually(() => ofKill().length >= operations.length * 2, 30_000, 'every effect');
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const name of operations) {
      expect(
        ofKill()
          .filter((d) => d.body.data.name === name)
          .map((d) => [d.body.data.version, d.body.data.state]),
      ).toEqual([
        [1, 'REQUIRES_ACTION'],
        [2, 'SUCCEEDED'],
      ]);
    }
  });
});

describe('6. POST /operations from a web page', () => {
  it('refuses an 8 MiB chunked body with 413 without reading it all', async () => {
    // A raw socket sending an 8 MiB chunked body 8 KiB at a time, reading the answer as soon as it comes.
    // (Sent all at once, the server's close with unread data makes the kernel reset the connection, and
    // a reset can discard the answer before the client reads it.)
    const { hostname, port } = new URL(ratchet.url);
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.on('data', (chunk) => {
      answer += chunk;
    });
    socket.on('error', () => {}); // EPIPE/ECONNRESET once the server has answered and closed
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(
      `POST /operations HTTP/1.1\r\nhost: ${hostname}:${port}\r\nauthorization: Bearer ${ratchet.apiToken}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`,
    );
    const chunk = `${(8 * 1024).toString(16)}\r\n${' '.repeat(8 * 1024)}\r\n`;
    let sent = 0;
    while (sent < 1024 && !socket.destroyed && !answer) {
      socket.write(chunk);
      sent++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    socket.destroy();
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(sent).toBeLessThan(1024);
  });

  it('refuses cross-site "simple" requests and foreign origins', async () => {
    const body = JSON.stringify({ name: 'batches/from-a-page' });
    const post = (headers: Record<string, string>) => ratchet.api(`/operations`, { method: 'POST', body, headers });
    expect((await post({ 'content-type': 'text/plain', origin: 'https://evil.example' })).status).toBe(403);
    expect((await post({ 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post({ 'content-type': 'application/json', origin: 'https://evil.example' })).status).toBe(403);
    expect((await read('batches/from-a-page')).status).toBe(404);
    expect((await post({ 'content-type': 'application/json', origin: ratchet.url })).status).toBe(201);
  });
});
