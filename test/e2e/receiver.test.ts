/**
 * `ratchet/receiver` on real effects: the local runtime sends its signed
 * outbound webhooks to a plain Node server that verifies each with
 * verifyEffect (a Gemini batch's state change; an OpenAI batch ended by a
 * bare webhook, whose counts the poll after it brings as `operation.result`);
 * then every forgery of a real delivery is refused with its code.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LambdaFunctionURLEvent } from 'aws-lambda';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { EffectVerificationError, type StateChangedEvent, verifyEffect } from '../../sdk/receiver.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type FakeOpenAI, openaiBatch, openaiDelivery, startFakeOpenAI } from '../support/fake-openai.ts';
import { apiOf } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const inbound = newSecret();
const outbound = newSecret();
const openaiSecret = newSecret();
let openai: FakeOpenAI;
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-receiver-'));
let runtime: LocalRuntime;
let server: Server;
const events: StateChangedEvent[] = [];
const raw: Array<{ headers: IncomingHttpHeaders; body: string }> = [];

beforeAll(async () => {
  // The receiver an application writes: verify, then act once per event id.
  server = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    raw.push({ headers: req.headers, body });
    try {
      events.push(verifyEffect(req.headers, body, outbound));
      res.writeHead(204).end();
    } catch (error) {
      res.writeHead(error instanceof EffectVerificationError ? 400 : 500).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const effectsUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ratchet`;
  openai = await startFakeOpenAI();
  runtime = await startLocalRuntime(
    loadConfig({
      DATA_DIR: dataDir,
      PORT: '0',
      WEBHOOK_SIGNING_SECRETS: inbound,
      EFFECTS_WEBHOOK_URL: effectsUrl,
      EFFECTS_SIGNING_SECRET: outbound,
      OPENAI_API_KEY: 'sk-receiver',
      OPENAI_BASE_URL: openai.url,
      OPENAI_WEBHOOK_SECRET: openaiSecret,
      RECONCILE_INTERVAL_SECONDS: '0.3',
    }),
  );
});

afterAll(async () => {
  await runtime?.stop();
  await openai?.close();
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  rmSync(dataDir, { recursive: true, force: true });
});

const codeOf = (run: () => unknown) => {
  try {
    run();
    return 'verified';
  } catch (error) {
    return error instanceof EffectVerificationError ? error.code : `untyped: ${(error as Error).message}`;
  }
};

describe('verifyEffect', () => {
  it('returns the typed event of each real effect, with its idempotency id', async () => {
    const name = `batches/receiver-${Date.now()}`;
    await apiOf(runtime)(`/operations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name, metadata: { order: 'A-17' } }),
    });
    const { body, headers } = signedDelivery(inbound, envelope('batch.succeeded', { id: name }));
    expect((await fetch(`${runtime.url}/webhooks/gemini`, { method: 'POST', body, headers })).status).toBe(200);
    await eventually(() => events.some((e) => e.data.name === name), 15_000, 'the effect received');
    const event = events.find((e) => e.data.name === name);
    expect(event).toEqual({
      id: `${name}#2`,
      type: 'operation.state_changed',
      timestamp: expect.any(String),
      data: expect.objectContaining({
        name,
        kind: 'batch',
        provider: 'gemini',
        state: 'SUCCEEDED',
        previousState: null,
        version: 2,
        userMetadata: { order: 'A-17' },
      }),
    });
    // The same check on a fetch Headers object (a Lambda function URL, a Hono or Next.js handler).
    const delivery = raw.find((r) => r.body.includes(name)) as { headers: IncomingHttpHeaders; body: string };
    const fetchHeaders = new Headers(delivery.headers as Record<string, string>);
    expect(verifyEffect(fetchHeaders, Buffer.from(delivery.body), outbound).id).toBe(`${name}#2`);
  });

  it("types an OpenAI batch's effects: its state from a bare webhook, then its outcome as operation.result, each with its provider", async () => {
    const batch = openaiBatch({ status: 'in_progress' });
    const id = batch.id as string;
    const name = `openai/batches/${id}`;
    openai.set('batch', batch);
    const { body, headers } = openaiDelivery(openaiSecret, { type: 'batch.completed', id });
    expect((await fetch(`${runtime.url}/webhooks/openai`, { method: 'POST', body, headers })).status).toBe(200);
    // The provider catches up: the next poll brings the counts.
    openai.set('batch', openaiBatch({ id, status: 'completed' }));
    await eventually(() => events.filter((e) => e.data.name === name).length === 2, 20_000, 'both effects received');
    const [ended, outcome] = events.filter((e) => e.data.name === name) as [StateChangedEvent, StateChangedEvent];
    expect(ended).toMatchObject({
      id: `${name}#1`,
      type: 'operation.state_changed',
      data: { kind: 'openai-batch', provider: 'openai', state: 'SUCCEEDED', result: null },
    });
    expect(outcome).toMatchObject({
      id: `${name}#2`,
      type: 'operation.result',
      data: { kind: 'openai-batch', provider: 'openai', state: 'SUCCEEDED', previousState: 'SUCCEEDED', version: 2 },
    });
    const counts = outcome.data.result?.requestCounts;
    expect(counts).toEqual({ total: expect.any(Number), succeeded: expect.any(Number), failed: expect.any(Number) });
    expect(outcome.data.result?.outputFileId).toEqual(expect.any(String));
  });

  it('examples/receiver-lambda takes a real delivery through a function URL event and refuses a forged one', async () => {
    process.env.EFFECTS_SIGNING_SECRET = outbound;
    const { handler } = await import('../../examples/receiver-lambda/index.ts');
    const delivery = raw[0] as { headers: IncomingHttpHeaders; body: string };
    const event = (body: string, base64: boolean) =>
      ({
        headers: delivery.headers as Record<string, string>,
        body: base64 ? Buffer.from(body).toString('base64') : body,
        isBase64Encoded: base64,
      }) as LambdaFunctionURLEvent;
    expect(await handler(event(delivery.body, false))).toEqual({ statusCode: 204 });
    expect(await handler(event(delivery.body, true))).toEqual({ statusCode: 204 });
    expect(await handler(event(delivery.body.replace('SUCCEEDED', 'FAILED'), false))).toEqual({ statusCode: 400, body: 'bad-signature' });
  });

  it('refuses each forgery of a real delivery with its code', () => {
    const delivery = raw[0] as { headers: IncomingHttpHeaders; body: string };
    const headers = delivery.headers as Record<string, string>;
    expect(codeOf(() => verifyEffect(headers, delivery.body, outbound))).toBe('verified');
    expect(codeOf(() => verifyEffect(headers, delivery.body, newSecret()))).toBe('bad-signature');
    expect(codeOf(() => verifyEffect(headers, delivery.body.replace('SUCCEEDED', 'FAILED'), outbound))).toBe('bad-signature');
    expect(codeOf(() => verifyEffect({ ...headers, 'webhook-id': 'other#1' }, delivery.body, outbound))).toBe('bad-signature');
    const { 'webhook-signature': _dropped, ...unsigned } = headers;
    expect(codeOf(() => verifyEffect(unsigned, delivery.body, outbound))).toBe('missing-headers');

    // Correctly signed, but sent 10 minutes ago (a replay) or 10 minutes ahead.
    const signer = new Webhook(outbound);
    const at = (offsetMs: number, body = delivery.body, id = headers['webhook-id'] as string) => {
      const when = new Date(Date.now() + offsetMs);
      return {
        'webhook-id': id,
        'webhook-timestamp': String(Math.floor(when.getTime() / 1000)),
        'webhook-signature': signer.sign(id, when, body),
      };
    };
    expect(codeOf(() => verifyEffect(at(-10 * 60_000), delivery.body, outbound))).toBe('stale-timestamp');
    expect(codeOf(() => verifyEffect(at(10 * 60_000), delivery.body, outbound))).toBe('stale-timestamp');
    expect(codeOf(() => verifyEffect(at(0), delivery.body, outbound))).toBe('verified');

    // Correctly signed bodies that are not Ratchet's event.
    const notJson = 'hello';
    expect(codeOf(() => verifyEffect(at(0, notJson), notJson, outbound))).toBe('malformed-body');
    const otherType = JSON.stringify({ ...JSON.parse(delivery.body), type: 'operation.deleted' });
    expect(codeOf(() => verifyEffect(at(0, otherType), otherType, outbound))).toBe('malformed-body');
    const badState = JSON.stringify({ ...JSON.parse(delivery.body), data: { ...JSON.parse(delivery.body).data, state: 'DONE' } });
    expect(codeOf(() => verifyEffect(at(0, badState), badState, outbound))).toBe('malformed-body');
  });
});

describe('verifyEffect without a usable secret', () => {
  it.each([
    ['unset', undefined],
    ['empty', ''],
    ['not whsec_', 'topsecret'],
  ])('%s: its own error class, code missing-secret, the value never in the message', (_, secret) => {
    let thrown: unknown;
    try {
      verifyEffect({ 'webhook-id': 'x' }, '{}', secret as string);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(EffectVerificationError);
    expect(thrown).toMatchObject({ code: 'missing-secret' });
    if (secret) expect((thrown as Error).message).not.toContain(secret);
  });
});
