/**
 * The console of a Ratchet mounted inside an application (`createRatchet`
 * under `/api/ratchet`, in a Hono app over HTTP), in headless Chromium: signed
 * in by the link `ratchet login` prints (RATCHET_URL with the prefix), live
 * updates arriving from the change stream under the prefix, an `onChange`
 * delivery shown delivered, and no request of the page outside the prefix.
 * The console is given its base path: nothing rewrites its HTML.
 */
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRatchet, type Ratchet } from '../../local/library.ts';
import { hostsBeyondLoopback, launchChromium, recordingPage } from '../support/browser.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { PROJECT_ROOT, runToExit } from '../support/ratchet-process.ts';

const BASE = '/api/ratchet';
const TOKEN = 'mounted-console-token-0123456789abcdef';
const secret = newSecret();
const handed: string[] = [];
let ratchet: Ratchet;
let origin: string;
let browser: Browser;
let server: ReturnType<typeof serve>;

beforeAll(async () => {
  ratchet = createRatchet({
    dataDir: ':memory:',
    basePath: BASE,
    apiToken: TOKEN,
    webhookSigningSecrets: secret,
    onChange: (change) => {
      handed.push(change.id);
    },
    env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL', EFFECTS_RETRY_BASE_MS: '50' },
  });
  await ratchet.start();
  const app = new Hono();
  app.get('/', (c) => c.text('the application’s own home page'));
  app.all(`${BASE}/*`, (c) => ratchet.fetch(c.req.raw));
  app.all(BASE, (c) => ratchet.fetch(c.req.raw));
  server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise((resolve) => server.once('listening', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await new Promise((done) => server?.close(done));
  await ratchet?.close();
});

async function deliver(type: string, id: string, time: string): Promise<void> {
  const { body, headers } = signedDelivery(secret, envelope(type, { id }, time));
  expect((await fetch(`${origin}${BASE}/webhooks/gemini`, { method: 'POST', body, headers })).status).toBe(200);
}

describe('the console mounted under /api/ratchet', () => {
  it('signs in by the printed link, follows live changes, shows onChange deliveries delivered, and asks nothing outside the prefix', async () => {
    // ratchet login, pointed at the mount, prints a link under it.
    const login = await runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'login'], {
      PATH: process.env.PATH ?? '',
      RATCHET_URL: `${origin}${BASE}`,
      RATCHET_API_TOKEN: TOKEN,
    });
    expect(login.code).toBe(0);
    const link = /(http:\/\/\S+\/login\?code=\S+)/.exec(login.output)?.[1] as string;
    expect(link.startsWith(`${origin}${BASE}/login?code=`)).toBe(true);

    const { page, requests } = await recordingPage(browser);
    await Promise.all([page.waitForURL(`${origin}${BASE}/`), page.goto(link)]);
    expect(await page.locator('h1 a').getAttribute('href')).toBe(`${BASE}/`);
    await page.waitForSelector('#live-status:has-text("live: updates as changes happen")');

    // A change while the page is open arrives without a reload.
    await deliver('batch.succeeded', 'batches/mounted-1', '2026-12-06T10:00:00Z');
    await page.waitForSelector('#operations tr[data-name="batches/mounted-1"]', { timeout: 15_000 });
    expect(await page.locator('#operations a[href]').first().getAttribute('href')).toBe(`${BASE}/console/operations/batches/mounted-1`);

    // Its page: the effect handed to onChange shows delivered.
    await expect.poll(() => handed, { timeout: 15_000 }).toContain('batches/mounted-1#1');
    await page.click('#operations a[href$="batches/mounted-1"]');
    await page.waitForURL(`${origin}${BASE}/console/operations/batches/mounted-1`);
    await expect.poll(async () => page.locator('#timeline').textContent(), { timeout: 15_000 }).toMatch(/delivered/);
    await page.waitForSelector('#live-status:has-text("live: updates as changes happen")');

    await page.close();

    expect(hostsBeyondLoopback(requests)).toEqual([]);
    const outside = requests.filter((url) => !new URL(url).pathname.startsWith(`${BASE}/`));
    expect(outside).toEqual([]);
  });

  it('takes the signed test webhook docs/apps.md sends to the mount (ratchet webhook with RATCHET_URL under the prefix)', async () => {
    const sent = await runToExit(
      [process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'webhook', 'batch.succeeded', 'batch_from_docs'],
      { PATH: process.env.PATH ?? '', RATCHET_URL: `${origin}${BASE}`, WEBHOOK_SIGNING_SECRETS: secret },
    );
    expect(sent.code).toBe(0);
    expect(sent.output).toMatch(/"applied":\s*true/);
    expect(await ratchet.get('batches/from_docs')).toMatchObject({ state: 'SUCCEEDED' });
  });

  it('sends a console page asked for without a session to the sign-in page, whose form and redirect stay under the mount', async () => {
    const { page, requests } = await recordingPage(browser);
    const answer = await page.goto(`${origin}${BASE}/console/operations/batches/mounted-1`);
    expect(answer?.status()).toBe(401);
    expect(await page.locator('form').getAttribute('action')).toBe(`${BASE}/login`);
    await page.fill('input[name=token]', TOKEN);
    await Promise.all([page.waitForURL(`${origin}${BASE}/console/operations/batches/mounted-1`), page.click('button[type=submit]')]);
    await page.close();
    expect(requests.filter((url) => !new URL(url).pathname.startsWith(`${BASE}/`))).toEqual([]);
  });
});
