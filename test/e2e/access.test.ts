/**
 * Who may use a Ratchet on one machine, tried against real server processes:
 * the API token on every route but the webhook and /healthz, the refusal to
 * serve beyond loopback without one, the Host and Origin allow-lists, owner-
 * only files, nothing printed that is secret, the tracking rate limit, and
 * the command-line tools and the client carrying the token.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RatchetClient, RatchetError } from '../../sdk/client.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { ed25519Key, KeyServer } from '../support/google-keys.ts';
import { type RatchetProcess, runToExit, startRatchet, TEST_API_TOKEN } from '../support/ratchet-process.ts';
import { type RawAnswer, rawRequest } from '../support/raw-http.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const ROTATED = 'second-token-for-rotation-0123';
const secret = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-access-'));
let ratchet: RatchetProcess;
let receiver: Receiver;
/** Where the Ratchets here look for Google's webhook keys: down throughout, counting each fetch. */
const keys = new KeyServer(ed25519Key());

beforeAll(async () => {
  keys.down = true;
  await keys.start();
  const outbound = newSecret();
  receiver = await new Receiver(outbound).start();
  ratchet = await startRatchet({
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    DATA_DIR: dataDir,
    WEBHOOK_SIGNING_SECRETS: secret,
    RATCHET_API_TOKEN: `${TEST_API_TOKEN} ${ROTATED}`,
    PUBLIC_URL: 'https://ratchet.example.com',
    GEMINI_WEBHOOK_KEYS_URL: keys.url,
    TRACK_RATE_PER_MINUTE: '1000',
  });
});
afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  await keys.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** A request with any Host header (fetch sets Host itself): what a DNS-rebinding page or a proxy sends. */
function raw(url: string, options: { method?: string; path: string; headers?: Record<string, string>; body?: string }): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return rawRequest({ hostname, port, method: options.method ?? 'GET', path: options.path, headers: options.headers }, options.body);
}

const json = { 'content-type': 'application/json' };
/** Every route behind the token, with a body where it takes one. */
const GUARDED: Array<{ method: string; path: string; body?: string }> = [
  { method: 'POST', path: '/operations', body: JSON.stringify({ name: 'batches/guarded' }) },
  { method: 'GET', path: '/' },
  { method: 'GET', path: '/console/operations/batches/guarded' },
  { method: 'GET', path: '/operations' },
  { method: 'GET', path: '/operations/batches/guarded' },
  { method: 'GET', path: '/operations/batches/guarded/history' },
  { method: 'GET', path: '/operations/batches/guarded/decisions' },
  { method: 'GET', path: '/effects/dead-letters' },
  { method: 'POST', path: '/effects/redrive', body: '{}' },
];

const call = (route: (typeof GUARDED)[number], authorization?: string) =>
  fetch(`${ratchet.url}${route.path}`, {
    method: route.method,
    headers: { ...json, ...(authorization && { authorization }) },
    ...(route.body && { body: route.body }),
  });

describe('the API token', () => {
  it('every route but the webhook and /healthz: 401 without a token and with a wrong one, 2xx with either rotated token', async () => {
    for (const route of GUARDED) {
      const none = await call(route);
      expect(none.status, `${route.method} ${route.path} without a token`).toBe(401);
      expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
      if (!route.path.startsWith('/console') && route.path !== '/') expect(await none.json()).toMatchObject({ error: 'unauthorized' });
      expect((await call(route, 'Bearer wrong-token-0123456789abcdef')).status, `${route.method} ${route.path} wrong token`).toBe(401);
      expect((await call(route, `Basic ${TEST_API_TOKEN}`)).status, `${route.method} ${route.path} not Bearer`).toBe(401);
      for (const token of [TEST_API_TOKEN, ROTATED]) {
        const right = await call(route, `Bearer ${token}`);
        expect(right.status, `${route.method} ${route.path} with a right token`).toBeLessThan(300);
        expect(right.headers.get('cache-control')).toBe('no-store');
        expect(right.headers.get('x-content-type-options')).toBe('nosniff');
        expect(right.headers.get('referrer-policy')).toBe('no-referrer');
      }
    }
    const delivery = signedDelivery(secret, envelope('batch.succeeded', { id: 'batch_open' }));
    const webhook = await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', ...delivery });
    expect(webhook.status).toBe(200);
    // The webhook's own path (local/http-server.ts) answers with the same security headers.
    expect(webhook.headers.get('x-content-type-options')).toBe('nosniff');
    expect(webhook.headers.get('cache-control')).toBe('no-store');
    expect(webhook.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect((await fetch(`${ratchet.url}/healthz`)).status).toBe(200);
  });

  it('a rebinding Host is 421 and a foreign Origin 403, with a token or without; PUBLIC_URL and loopback names pass', async () => {
    const port = new URL(ratchet.url).port;
    const bearer = { authorization: `Bearer ${TEST_API_TOKEN}` };
    for (const headers of [{}, bearer]) {
      const rebound = await raw(ratchet.url, { path: '/operations', headers: { ...headers, host: `evil.example:${port}` } });
      expect(rebound.status).toBe(421);
      const posted = await raw(ratchet.url, {
        method: 'POST',
        path: '/operations',
        headers: { ...headers, ...json, host: `evil.example:${port}`, origin: `http://evil.example:${port}` },
        body: JSON.stringify({ name: 'batches/rebound' }),
      });
      expect(posted.status).toBe(421);
      const foreign = await raw(ratchet.url, {
        method: 'POST',
        path: '/operations',
        headers: { ...headers, ...json, origin: 'https://evil.example' },
        body: JSON.stringify({ name: 'batches/foreign' }),
      });
      expect(foreign.status).toBe(403);
    }
    for (const host of [`localhost:${port}`, `[::1]:${port}`, `127.0.0.1:${port}`, 'ratchet.example.com']) {
      expect((await raw(ratchet.url, { path: '/operations', headers: { ...bearer, host } })).status, host).toBe(200);
    }
    const fromPublic = await raw(ratchet.url, {
      method: 'POST',
      path: '/operations',
      headers: { ...bearer, ...json, host: 'ratchet.example.com', origin: 'https://ratchet.example.com' },
      body: JSON.stringify({ name: 'batches/from-public' }),
    });
    expect(fromPublic.status).toBe(201);
    // The webhook answers whatever the Host: Gemini reaches it through a proxy under the public name.
    const delivery = signedDelivery(secret, envelope('batch.succeeded', { id: 'batch_any_host' }));
    const webhook = await raw(ratchet.url, {
      method: 'POST',
      path: '/webhooks/gemini',
      headers: { ...delivery.headers, host: 'gemini-facing.example' },
      body: delivery.body,
    });
    expect(webhook.status).toBe(200);
    expect((await ratchet.api('/operations/batches/rebound')).status).toBe(404);
    expect((await ratchet.api('/operations/batches/foreign')).status).toBe(404);
  });

  it('1,000 anonymous tracks change nothing on disk', async () => {
    const files = ['ratchet.db', 'ratchet.db-wal'].map((name) => join(dataDir, name));
    const digest = () => files.map((file) => createHash('sha256').update(readFileSync(file)).digest('hex')).join();
    // What earlier tests set going (effects, their ledger) has settled: the files hold still for a second.
    let before = digest();
    await eventually(
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const now = digest();
        const still = now === before;
        before = now;
        return still;
      },
      20_000,
      'the data files holding still',
    );
    const answers = await Promise.all(
      Array.from({ length: 1_000 }, (_, i) =>
        fetch(`${ratchet.url}/operations`, {
          method: 'POST',
          headers: json,
          body: JSON.stringify({ name: `batches/anon-${i}`, metadata: { pad: 'x'.repeat(3_500) } }),
        }).then((r) => r.status),
      ),
    );
    expect(new Set(answers)).toEqual(new Set([401]));
    expect(digest()).toBe(before);
  });

  it('keeps the data folder 0700 and its files 0600', () => {
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    for (const name of ['ratchet.db', 'ratchet.db-wal', 'ratchet.db-shm', 'ratchet.lock', 'ratchet.pid']) {
      expect(statSync(join(dataDir, name)).mode & 0o777, name).toBe(0o600);
    }
  });

  it('the client sends its token (or RATCHET_API_TOKEN); without one it is a RatchetError unauthorized', async () => {
    const client = new RatchetClient({ url: ratchet.url, token: ROTATED });
    expect((await client.track('batches/client-token')).created).toBe(true);
    expect((await client.get('batches/client-token'))?.name).toBe('batches/client-token');
    const saved = process.env.RATCHET_API_TOKEN;
    process.env.RATCHET_API_TOKEN = '';
    try {
      const error = await new RatchetClient({ url: ratchet.url }).get('batches/client-token').catch((e) => e);
      expect(error).toBeInstanceOf(RatchetError);
      expect(error).toMatchObject({ code: 'unauthorized', status: 401 });
      process.env.RATCHET_API_TOKEN = `${TEST_API_TOKEN},${ROTATED}`;
      expect((await new RatchetClient({ url: ratchet.url }).get('batches/client-token'))?.name).toBe('batches/client-token');
    } finally {
      if (saved === undefined) delete process.env.RATCHET_API_TOKEN;
      else process.env.RATCHET_API_TOKEN = saved;
    }
  });
});

describe('a token of its own, on loopback', () => {
  const folder = mkdtempSync(join(tmpdir(), 'ratchet-access-generated-'));
  let own: RatchetProcess;
  beforeAll(async () => {
    // An existing folder open to everyone, as an older Ratchet (or the umask) left it.
    chmodSync(folder, 0o755);
    writeFileSync(join(folder, 'ratchet.db'), '', { mode: 0o644 });
    chmodSync(join(folder, 'ratchet.db'), 0o644);
    own = await startRatchet({
      DATA_DIR: folder,
      RATCHET_API_TOKEN: '',
      TRACK_RATE_PER_MINUTE: '3',
      POWERTOOLS_LOG_LEVEL: 'INFO',
      GEMINI_WEBHOOK_KEYS_URL: keys.url,
      GEMINI_WEBHOOK_SCHEMES: 'hmac',
    });
  });
  afterAll(async () => {
    await own?.stop();
    rmSync(folder, { recursive: true, force: true });
  });

  it('generates one into the data folder (0600), prints its path and never the token or the webhook secret', () => {
    const file = join(folder, 'api-token');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const token = readFileSync(file, 'utf8').trim();
    expect(token.length).toBeGreaterThanOrEqual(32);
    expect(own.apiToken).toBe(token);
    const output = own.output();
    expect(output).toContain(file);
    expect(output).not.toContain(token);
    const devSecret = readFileSync(join(folder, 'dev-webhook-secret'), 'utf8').trim();
    expect(output).not.toContain(devSecret);
    expect(output).not.toMatch(/whsec_/);
    expect(statSync(join(folder, 'dev-webhook-secret')).mode & 0o777).toBe(0o600);
  });

  it('brought the folder and its files to owner-only at start, with a line saying so', () => {
    expect(statSync(folder).mode & 0o777).toBe(0o700);
    expect(statSync(join(folder, 'ratchet.db')).mode & 0o777).toBe(0o600);
    expect(own.output()).toMatch(/brought to owner-only.*was 755/);
  });

  it('limits tracking per token: a clear 429 with Retry-After, other reads unaffected', async () => {
    const track = (i: number) =>
      own.api('/operations', { method: 'POST', headers: json, body: JSON.stringify({ name: `batches/rate-${i}` }) });
    for (let i = 0; i < 3; i++) expect((await track(i)).status).toBe(201);
    const refused = await track(3);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await refused.json()).toMatchObject({ error: 'rate-limited' });
    expect((await own.api('/operations/batches/rate-3')).status).toBe(404);
    expect((await own.api('/operations')).status).toBe(200);
  });

  it('with GEMINI_WEBHOOK_SCHEMES=hmac v1a junk is 401 at once, and no key is ever fetched', async () => {
    const before = keys.fetches;
    const body = JSON.stringify(envelope('batch.succeeded', { id: 'batch_junk' }));
    for (let i = 0; i < 20; i++) {
      const response = await fetch(`${own.url}/webhooks/gemini`, { method: 'POST', headers: junk(i), body });
      expect(response.status).toBe(401);
    }
    expect(keys.fetches).toBe(before);
  });

  it('redrive finds the token in the data folder it is pointed at, and says so when it is refused', async () => {
    const env = { ...process.env, RATCHET_URL: own.url, DATA_DIR: folder, RATCHET_API_TOKEN: '' } as Record<string, string>;
    const listed = await runToExit(['node', '--import', 'tsx', 'local/cli/ratchet.ts', 'redrive', '--list'], env);
    // Past the token: this Ratchet runs without the outbound sink, and says so (a 401 would say the token was refused).
    expect(listed.output).toMatch(/effects are off/);
    expect(listed.output).not.toMatch(/refused the API token/);
    const elsewhere = mkdtempSync(join(tmpdir(), 'ratchet-access-other-'));
    try {
      const refused = await runToExit(['node', '--import', 'tsx', 'local/cli/ratchet.ts', 'redrive', '--list'], {
        ...env,
        DATA_DIR: elsewhere,
        RATCHET_API_TOKEN: 'not-the-token-0123456789abcdef',
      });
      expect(refused.code).toBe(1);
      expect(refused.output).toMatch(/refused the API token/);
      expect(refused.output.trim().split('\n')).toHaveLength(1);
    } finally {
      rmSync(elsewhere, { recursive: true, force: true });
    }
  });
});

/** `webhook-signature: v1a,<random>`: needs no secret to send, and once made Ratchet fetch the keys each time. */
const junk = (i: number) => ({
  'webhook-id': `msg_junk_${i}`,
  'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
  'webhook-signature': `v1a,${randomBytes(64).toString('base64')}`,
});

describe('signatures that need a key fetch', () => {
  it('100 v1a deliveries of junk while the keys are down: each a 503, one key fetch in all (the failure kept 30 s)', async () => {
    const before = keys.fetches;
    const body = JSON.stringify(envelope('batch.succeeded', { id: 'batch_junk' }));
    // One after another: concurrent ones would share one fetch in flight anyway.
    const statuses: number[] = [];
    for (let i = 0; i < 100; i++) {
      statuses.push((await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', headers: junk(i), body })).status);
    }
    expect(new Set(statuses)).toEqual(new Set([503]));
    expect(keys.fetches - before).toBe(1);
  });
});

describe('serving beyond loopback', () => {
  it('without a token: refuses to start, exit 2, one clear line, nothing written', async () => {
    const folder = join(mkdtempSync(join(tmpdir(), 'ratchet-access-open-')), 'data');
    const { code, output } = await runToExit(['node', '--import', 'tsx', 'local/cli/ratchet.ts', 'start'], {
      ...process.env,
      HOST: '0.0.0.0',
      PORT: '0',
      DATA_DIR: folder,
      RATCHET_API_TOKEN: '',
    } as Record<string, string>);
    expect(code).toBe(2);
    expect(output.trim()).toMatch(/^ratchet: HOST=0\.0\.0\.0 can be reached from other hosts: set RATCHET_API_TOKEN/);
    expect(output.trim().split('\n')).toHaveLength(1);
    expect(() => statSync(folder)).toThrow();
  });

  it('with a token too short to be one: exit 2 naming the rule, never the value', async () => {
    const { code, output } = await runToExit(['node', '--import', 'tsx', 'local/cli/ratchet.ts', 'start'], {
      ...process.env,
      HOST: '0.0.0.0',
      PORT: '0',
      DATA_DIR: ':memory:',
      RATCHET_API_TOKEN: 'short',
    } as Record<string, string>);
    expect(code).toBe(2);
    expect(output).toMatch(/at least 16 characters/);
    expect(output).not.toContain('short ');
  });

  it('with a token: serves on every interface, and still asks for it', async () => {
    const open = await startRatchet({ HOST: '0.0.0.0', DATA_DIR: ':memory:' });
    try {
      const port = new URL(open.url).port;
      expect((await fetch(`http://127.0.0.1:${port}/operations`)).status).toBe(401);
      expect((await fetch(`http://127.0.0.1:${port}/operations`, { headers: { authorization: `Bearer ${TEST_API_TOKEN}` } })).status).toBe(
        200,
      );
    } finally {
      await open.stop();
    }
  });
});
