/**
 * The HTTPS set-up docs/operations.md documents, run as written: each
 * Caddyfile in its `caddyfile` blocks, with the public name swapped for a
 * test name, in front of a real Ratchet. Caddy serves it with a certificate
 * from its own local authority, which the requests here trust (nothing is
 * skipped in TLS). Needs Debian's `caddy` (.ci/run installs it); without it
 * the suite says so in one line and is skipped.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../support/aws/moto.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { PROJECT_ROOT, type RatchetProcess, startRatchet, TEST_API_TOKEN } from '../support/ratchet-process.ts';
import { type RawAnswer, rawRequest } from '../support/raw-http.ts';
import { eventually } from '../support/receiver.ts';

const caddy = spawnSync('caddy', ['version']).status === 0;
if (!caddy) console.log('https-proxy: caddy is not installed (apt-get install caddy): the documented HTTPS set-up is not run here');

const NAME = 'ratchet.test';
const documented = [...readFileSync(join(PROJECT_ROOT, 'docs/operations.md'), 'utf8').matchAll(/```caddyfile\n([\s\S]*?)```/g)].map(
  (m) => m[1] as string,
);

interface Proxy {
  port: number;
  ca: string;
  stop(): Promise<void>;
}

/** Runs one documented Caddyfile: the site name becomes https://ratchet.test:<port>, the upstream Ratchet's port. */
async function runCaddy(site: string, upstream: string, port: number): Promise<Proxy> {
  const dir = mkdtempSync(join(tmpdir(), 'ratchet-caddy-'));
  const httpPort = await freePort();
  const config = `{
	admin off
	local_certs
	skip_install_trust
	auto_https disable_redirects
	http_port ${httpPort}
	storage file_system {
		root ${dir}
	}
}
${site.replace('ratchet.example.com', `https://${NAME}:${port}`).replaceAll('127.0.0.1:3000', new URL(upstream).host)}`;
  writeFileSync(join(dir, 'Caddyfile'), config);
  const child: ChildProcess = spawn('caddy', ['run', '--config', join(dir, 'Caddyfile'), '--adapter', 'caddyfile'], {
    env: { PATH: process.env.PATH, HOME: dir, XDG_DATA_HOME: dir, XDG_CONFIG_HOME: dir },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout?.on('data', (c) => {
    output += c;
  });
  child.stderr?.on('data', (c) => {
    output += c;
  });
  const caFile = join(dir, 'pki/authorities/local/root.crt');
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`caddy exited:\n${output}`);
      try {
        await https({ port, ca: readFileSync(caFile, 'utf8') }, { path: '/healthz' });
        return true;
      } catch {
        return false;
      }
    },
    30_000,
    'caddy serving',
  );
  return {
    port,
    ca: readFileSync(caFile, 'utf8'),
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A request over TLS to the proxy, verified against its authority, for ratchet.test. */
function https(
  proxy: { port: number; ca: string },
  options: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<RawAnswer> {
  return rawRequest(
    {
      tls: true,
      host: '127.0.0.1',
      port: proxy.port,
      servername: NAME,
      ca: proxy.ca,
      method: options.method ?? 'GET',
      path: options.path,
      headers: { host: `${NAME}:${proxy.port}`, ...options.headers },
    },
    options.body,
  );
}

describe.skipIf(!caddy)('HTTPS in front, as docs/operations.md sets it up with Caddy', () => {
  const secret = newSecret();
  let ratchet: RatchetProcess;
  let publicPort: number;
  const bearer = { authorization: `Bearer ${TEST_API_TOKEN}` };

  beforeAll(async () => {
    expect(documented).toHaveLength(2);
    publicPort = await freePort();
    ratchet = await startRatchet({
      DATA_DIR: ':memory:',
      WEBHOOK_SIGNING_SECRETS: secret,
      PUBLIC_URL: `https://${NAME}:${publicPort}`,
    });
  });
  afterAll(async () => {
    await ratchet?.stop();
  });

  /** Caddy on the port PUBLIC_URL names, for one test. */
  async function withProxy(site: string, test: (proxy: Proxy) => Promise<void>) {
    const proxy = await runCaddy(site, ratchet.url, publicPort);
    try {
      await test(proxy);
    } finally {
      await proxy.stop();
    }
  }

  it('forwarding only the webhook: a signed delivery goes through and is applied; the API is not reachable from outside', async () => {
    await withProxy(documented[0] as string, async (proxy) => {
      const delivery = signedDelivery(secret, envelope('batch.succeeded', { id: 'batch_over_tls' }));
      const answer = await https(proxy, { method: 'POST', path: '/webhooks/gemini', headers: delivery.headers, body: delivery.body });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toMatchObject({ applied: true });
      expect((await https(proxy, { path: '/operations/batches/over_tls', headers: bearer })).status).toBe(404);
      expect((await https(proxy, { path: '/', headers: bearer })).status).toBe(404);
      expect(await (await ratchet.api('/operations/batches/over_tls')).json()).toMatchObject({ state: 'SUCCEEDED' });
    });
  });

  it('forwarding everything: the API needs the token through the proxy, and the console cookie is Secure', async () => {
    await withProxy(documented[1] as string, async (proxy) => {
      expect((await https(proxy, { path: '/operations' })).status).toBe(401);
      expect((await https(proxy, { path: '/operations', headers: bearer })).status).toBe(200);
      const signIn = await https(proxy, {
        method: 'POST',
        path: '/login',
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: `https://${NAME}:${publicPort}` },
        body: `token=${encodeURIComponent(TEST_API_TOKEN)}`,
      });
      expect(signIn.status).toBe(303);
      const cookie = String(signIn.headers['set-cookie']);
      expect(cookie).toMatch(/^ratchet_session=/);
      expect(cookie).toMatch(/; Secure/);
      expect(cookie).toMatch(/; HttpOnly/);
      const delivery = signedDelivery(secret, envelope('batch.succeeded', { id: 'batch_everything' }));
      expect(
        (await https(proxy, { method: 'POST', path: '/webhooks/gemini', headers: delivery.headers, body: delivery.body })).status,
      ).toBe(200);
    });
  });
});
