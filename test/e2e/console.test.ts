/**
 * The console in headless Chromium (Debian's `chromium`, driven by
 * playwright-core): counts per state and kind that filter the list, open
 * operations first, times people read, every event of an operation (refused
 * ones with their reason) with each effect beside its write, a dead-lettered
 * effect flagged and re-driven; pages updated live from the change stream
 * (and following it again from a fresh page when the server refuses it);
 * nothing requested beyond 127.0.0.1; readable on a phone.
 */
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { hostsBeyondLoopback, launchChromium, recordingPage, signIn } from '../support/browser.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { PROJECT_ROOT, type RatchetProcess, runToExit, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const inbound = newSecret();
const outbound = newSecret();
let receiver: Receiver;
let ratchet: RatchetProcess;
let browser: Browser;
const requested: string[] = [];

beforeAll(async () => {
  receiver = await new Receiver(outbound).start();
  ratchet = await startRatchet({
    DATA_DIR: ':memory:',
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_RETRY_BASE_MS: '100',
  });
  browser = await launchChromium();
});
afterAll(async () => {
  await browser?.close();
  await ratchet?.stop();
  await receiver?.stop();
});
afterEach(() => {
  expect(hostsBeyondLoopback(requested.splice(0)).map(String)).toEqual([]);
});

async function open(path: string, viewport?: { width: number; height: number }) {
  const { page, requests } = await recordingPage(browser, viewport);
  page.on('close', () => requested.push(...requests));
  await signIn(page, ratchet.url, ratchet.apiToken as string);
  await page.goto(`${ratchet.url}${path}`);
  return page;
}
async function deliver(type: string, id: string, time: string, webhookId?: string) {
  const { body, headers } = signedDelivery(inbound, envelope(type, { id }, time), { id: webhookId });
  expect((await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers })).status).toBe(200);
}
const historyLength = async (name: string) =>
  ((await (await ratchet.api(`/operations/${name}/history`)).json()) as { history: unknown[] }).history.length;

const rowNames = (page: Awaited<ReturnType<typeof open>>) =>
  page.locator('#operations tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-name')));
const countOf = async (page: Awaited<ReturnType<typeof open>>, filter: string) =>
  Number(await page.locator(`#counts a[data-filter="${filter}"] .count`).textContent());

describe('the console', () => {
  it('counts operations per state and kind, each count a filter link, open operations first, times as "ago"', async () => {
    await ratchet.api(`/operations`, {
      method: 'POST',
      body: JSON.stringify({ name: 'batches/c0', metadata: { order: '<A-17>' } }),
      headers: { 'content-type': 'application/json' },
    });
    await deliver('interaction.requires_action', 'interactions/c1', '2026-11-30T10:00:01Z');
    await deliver('interaction.completed', 'interactions/c1', '2026-11-30T10:00:02Z');
    await deliver('batch.succeeded', 'batches/c2', '2026-11-30T10:00:03Z');
    await eventually(async () => (await historyLength('interactions/c1')) === 2, 15_000, 'history');
    await eventually(() => receiver.applied().length >= 3, 15_000, 'effects');

    const page = await open('/');
    // The tracked batch is the oldest, and open: it comes first.
    expect(await rowNames(page)).toEqual(['batches/c0', 'batches/c2', 'interactions/c1']);
    const counts = Object.fromEntries(
      await Promise.all(
        ['all', 'open', 'tracked', 'SUCCEEDED', 'any kind', 'batch', 'interaction'].map(async (f) => [f, await countOf(page, f)]),
      ),
    );
    expect(counts).toEqual({ all: 3, open: 1, tracked: 1, SUCCEEDED: 2, 'any kind': 3, batch: 2, interaction: 1 });
    expect(await page.locator('tr[data-name="batches/c0"]').textContent()).toContain('not polled here');
    const time = page.locator('tr[data-name="batches/c2"] time');
    expect(await time.textContent()).toMatch(/^(now|\d+ s ago)$/);
    expect(await time.getAttribute('title')).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/);

    await page.click('#counts a[data-filter="SUCCEEDED"]');
    await page.waitForURL(/state=SUCCEEDED/);
    expect(await rowNames(page)).toEqual(['batches/c2', 'interactions/c1']);
    expect(await countOf(page, 'batch')).toBe(1); // the kinds count within the state chosen
    await page.click('#counts a[data-filter="interaction"]');
    await page.waitForURL(/state=SUCCEEDED&kind=interaction/);
    expect(await rowNames(page)).toEqual(['interactions/c1']);
    await page.click('#counts a[data-filter="open"]');
    await page.waitForURL(/state=open&kind=interaction/);
    expect(await rowNames(page)).toEqual([]);
    expect(await page.locator('body').textContent()).toContain('No operation matches this filter.');
    await page.close();
  });

  it("filters by provider beside the kind (?provider=), its kinds alone listed, and shows each row's provider", async () => {
    for (const name of ['openai/batches/batch_c8', 'openai/responses/resp_c8', 'anthropic/messages/batches/msgbatch_c9'])
      expect(
        (
          await ratchet.api('/operations', {
            method: 'POST',
            body: JSON.stringify({ name }),
            headers: { 'content-type': 'application/json' },
          })
        ).status,
      ).toBe(201);
    const page = await open('/');
    const counts = async (filters: string[]) =>
      Object.fromEntries(await Promise.all(filters.map(async (f) => [f, await countOf(page, f)])));
    expect(await counts(['any provider', 'gemini', 'openai', 'anthropic'])).toEqual({
      'any provider': 6,
      gemini: 3,
      openai: 2,
      anthropic: 1,
    });
    expect(await page.locator('#counts a[data-filter="bedrock"]').count()).toBe(0); // none of its jobs
    expect(await page.locator('tr[data-name="openai/batches/batch_c8"] td.provider').textContent()).toBe('openai');
    expect(await page.locator('tr[data-name="batches/c2"] td.provider').textContent()).toBe('gemini');

    // Gemini's jobs are of several kinds: in the order of the whole list, open first.
    await page.click('#counts a[data-filter="gemini"]');
    await page.waitForURL(/\?provider=gemini$/);
    expect(await rowNames(page)).toEqual(['batches/c0', 'batches/c2', 'interactions/c1']);
    await page.click('#counts a[data-filter="openai"]');
    await page.waitForURL(/\?provider=openai$/);
    expect(await rowNames(page)).toEqual(['openai/responses/resp_c8', 'openai/batches/batch_c8']);
    // Its kinds alone, and the states within it.
    expect(await page.locator('#counts a[data-filter="batch"]').count()).toBe(0);
    expect(await counts(['all', 'tracked', 'any kind', 'openai-batch', 'openai-response'])).toEqual({
      all: 2,
      tracked: 2,
      'any kind': 2,
      'openai-batch': 1,
      'openai-response': 1,
    });
    await page.click('#counts a[data-filter="openai-batch"]');
    await page.waitForURL(/\?provider=openai&kind=openai-batch$/);
    expect(await rowNames(page)).toEqual(['openai/batches/batch_c8']);
    // Another provider lets the kind go.
    await page.click('#counts a[data-filter="anthropic"]');
    await page.waitForURL(/\?provider=anthropic$/);
    expect(await rowNames(page)).toEqual(['anthropic/messages/batches/msgbatch_c9']);
    await page.click('#counts a[data-filter="any provider"]');
    await page.waitForURL(/\/$/);
    expect((await rowNames(page)).length).toBe(6);
    await page.goto(`${ratchet.url}/?provider=openai&kind=batch`);
    expect(await page.locator('body').textContent()).toContain('No operation matches this filter.');
    await page.goto(`${ratchet.url}/console/operations/openai/batches/batch_c8`);
    expect(await page.locator('#live p').first().textContent()).toMatch(/^tracked · openai · openai-batch · version 1/);
    await page.close();
  });

  it("shows an operation's every event: applied writes with their effect beside them, refused ones greyed with the reason", async () => {
    await deliver('interaction.requires_action', 'interactions/c1', '2026-11-30T10:00:00Z'); // after the end
    const page = await open('/');
    await page.click('a[href="/console/operations/interactions/c1"]');
    const rows = page.locator('#timeline tbody tr');
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.className))).toEqual(['applied', 'applied', 'refused']);
    const texts = await rows.allInnerTexts();
    expect(texts[0]).toMatch(/webhook\s+hmac[\s\S]*v1 – → REQUIRES_ACTION\s+delivered/);
    expect(texts[1]).toMatch(/v2 REQUIRES_ACTION → SUCCEEDED\s+delivered/);
    expect(texts[2]).toMatch(/REQUIRES_ACTION[\s\S]*refused: after the job ended \(regress-from-terminal\)/);
    // Greyed: the refused row's colour is not the applied rows'.
    const colours = (await page.evaluate(
      "[...document.querySelectorAll('#timeline tbody tr')].map((tr) => getComputedStyle(tr).color)",
    )) as string[];
    expect(colours[2]).not.toBe(colours[1]);
    expect(await page.locator('#polling').textContent()).toBe('Polling: done');
    expect(await page.locator('#metadata').count()).toBe(0); // none given
    // A job tracked with the application's metadata shows it, as text.
    await page.goto(`${ratchet.url}/console/operations/batches/c0`);
    expect(await page.locator('#metadata').textContent()).toBe('Metadata: {"order":"<A-17>"}');
    await page.close();
  });

  it('updates live from the change stream: the timeline and the list gain rows as they happen, without a reload', async () => {
    await deliver('interaction.requires_action', 'interactions/live1', '2026-12-05T10:00:01Z');
    const page = await open('/console/operations/interactions/live1');
    // What the browser says in its console: no Content-Security-Policy error (or any other) during live updates.
    const complaints: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error' || message.type() === 'warning') complaints.push(message.text());
    });
    page.on('pageerror', (error) => complaints.push(error.message));
    let loads = 0;
    page.on('framenavigated', (frame) => {
      if (frame === page.mainFrame()) loads++;
    });
    await page.locator('#live-status', { hasText: 'live: updates as changes happen' }).waitFor();
    expect(await page.locator('#timeline tbody tr').count()).toBe(1);
    await deliver('interaction.completed', 'interactions/live1', '2026-12-05T10:00:02Z');
    await page.locator('#timeline tbody tr').nth(1).waitFor({ timeout: 10_000 });
    expect(await page.locator('#timeline tbody tr').nth(1).textContent()).toMatch(/v2 REQUIRES_ACTION → SUCCEEDED/);
    expect(await page.locator('#live strong').first().textContent()).toBe('SUCCEEDED');
    expect(loads).toBe(0);

    await page.goto(`${ratchet.url}/`);
    await page.locator('#live-status', { hasText: 'live: updates as changes happen' }).waitFor();
    loads = 0;
    expect(await page.locator('#operations tr[data-name="batches/live2"]').count()).toBe(0);
    await deliver('batch.succeeded', 'batches/live2', '2026-12-05T10:00:03Z');
    await page.locator('#operations tr[data-name="batches/live2"]').waitFor({ timeout: 10_000 });
    expect(loads).toBe(0);
    expect(complaints).toEqual([]);
    await page.close();
  });

  it('follows again from a fresh page when the server refuses the stream (410 past retention), and says to reload after three refusals', async () => {
    // Fault injection in front of the real server: the stream refused as a cursor past the feed's retention is.
    const refuse = { status: 410, contentType: 'application/json', body: JSON.stringify({ error: 'cursor-expired' }) };
    await deliver('interaction.requires_action', 'interactions/live3', '2026-12-05T10:00:01Z');
    const { page, requests } = await recordingPage(browser);
    page.on('close', () => requested.push(...requests));
    await signIn(page, ratchet.url, ratchet.apiToken as string);
    const streams: string[] = [];
    await page.route('**/changes/stream?**', (route) => {
      streams.push(route.request().url());
      return streams.length === 1 ? route.fulfill(refuse) : route.continue();
    });
    await page.goto(`${ratchet.url}/console/operations/interactions/live3`);
    await page.locator('#live-status', { hasText: 'live: updates as changes happen' }).waitFor({ timeout: 10_000 });
    expect(streams).toHaveLength(2);
    // The second stream is the re-fetched page's, and it is followed: a change still shows.
    await deliver('interaction.completed', 'interactions/live3', '2026-12-05T10:00:02Z');
    await page.locator('#timeline tbody tr').nth(1).waitFor({ timeout: 10_000 });
    expect(await page.locator('#live strong').first().textContent()).toBe('SUCCEEDED');

    // Refused every time: three fresh starts (1 s, 2 s, 3 s apart), then the page says so instead of "reconnecting".
    await page.unroute('**/changes/stream?**');
    streams.length = 0;
    await page.route('**/changes/stream?**', (route) => {
      streams.push(route.request().url());
      return route.fulfill(refuse);
    });
    await page.reload();
    await page.locator('#live-status', { hasText: 'live updates stopped: reload the page' }).waitFor({ timeout: 15_000 });
    expect(streams).toHaveLength(4);
    await page.close();
  });

  it("shows an effect's delivery without a reload: retrying while the receiver fails, then delivered", async () => {
    receiver.mode = 'fail';
    const refusedBefore = receiver.refused;
    try {
      await deliver('batch.succeeded', 'batches/live4', '2026-12-05T10:00:04Z');
      await eventually(() => receiver.refused > refusedBefore, 15_000, 'a refused attempt');
      const page = await open('/console/operations/batches/live4');
      let loads = 0;
      page.on('framenavigated', (frame) => {
        if (frame === page.mainFrame()) loads++;
      });
      await page.locator('#timeline td.effect', { hasText: /^retrying attempt \d+/ }).waitFor({ timeout: 10_000 });
      receiver.mode = 'ok';
      // Delivered, with the outage's trace: the attempt it went through on, and what the receiver answered before.
      await page
        .locator('#timeline td.effect', { hasText: /^delivered on attempt \d+; before, answered 503 Service Unavailable$/ })
        .waitFor({ timeout: 15_000 });
      expect(loads).toBe(0);
      await page.close();
    } finally {
      receiver.mode = 'ok';
    }
  });

  it('shows a receiver that answers 400 at once: listed under effects=retrying (console and API), the answer in words on its page', async () => {
    receiver.mode = 'bad-request';
    receiver.refuseOnly = (name) => name === 'batches/refused400';
    try {
      await deliver('batch.succeeded', 'batches/refused400', '2026-12-05T10:00:05Z');
      // Within seconds of the first refusal, not a day later when it would be dead-lettered.
      await eventually(
        async () =>
          ((await (await ratchet.api('/operations?effects=retrying')).json()) as { operations: Array<{ name: string }> }).operations.some(
            (o) => o.name === 'batches/refused400',
          ),
        10_000,
        'listed as retrying',
      );
      const list = await open('/?effects=retrying');
      expect(await rowNames(list)).toEqual(['batches/refused400']);
      expect(await list.locator('tr[data-name="batches/refused400"] td span.retrying').textContent()).toBe('retrying');
      expect(await countOf(list, 'retrying')).toBeGreaterThanOrEqual(1);
      await list.close();
      const page = await open('/console/operations/batches/refused400');
      await page.locator('#timeline td.effect .last-attempt', { hasText: 'answered 400 Bad Request' }).waitFor({ timeout: 10_000 });
      // Retrying, not dead-lettered: redrive has nothing to act on yet, so no button.
      expect(await page.locator('#redrive').count()).toBe(0);
      await page.close();
      expect((await ratchet.api('/operations?effects=sometimes')).status).toBe(400);
    } finally {
      receiver.mode = 'ok';
      receiver.refuseOnly = undefined;
    }
    await eventually(() => receiver.applied().some((d) => d.body.data.name === 'batches/refused400'), 15_000, 'delivered once it accepts');
  });

  it('flags a dead-lettered effect in the list and beside its write, and its redrive button delivers it', async () => {
    receiver.mode = 'gone'; // 410: dead-lettered at once
    await deliver('batch.failed', 'batches/c3', '2026-11-30T10:00:04Z');
    const page = await open('/');
    await eventually(
      async () => {
        await page.goto(`${ratchet.url}/`);
        return ((await page.locator('tr[data-name="batches/c3"]').textContent()) ?? '').includes('dead-lettered');
      },
      15_000,
      'the dead letter in the list',
    );
    await page.click('#counts a[data-filter="dead-lettered"]');
    await page.waitForURL(/effects=dead-lettered/);
    expect(await rowNames(page)).toEqual(['batches/c3']);
    await page.click('a[href="/console/operations/batches/c3"]');
    expect(await page.locator('#timeline tbody tr td.effect').allInnerTexts()).toEqual([expect.stringMatching(/^dead-lettered gone/)]);
    receiver.mode = 'ok';
    await page.click('#redrive');
    // A locator, not waitForFunction's string: the page's CSP allows no eval.
    await page.locator('#redrive', { hasText: /^redriven: / }).waitFor();
    await eventually(() => receiver.applied().some((d) => d.body.data.name === 'batches/c3'), 15_000, 'the redriven effect');
    // The receiver has it before Ratchet has recorded its answer: the page says so once it has, without a reload.
    await page.locator('#timeline td.effect', { hasText: /^delivered/ }).waitFor({ timeout: 15_000 });
    await page.close();
  });

  it('is readable on a phone: nothing wider than the screen', async () => {
    for (const path of ['/', '/console/operations/interactions/c1']) {
      const page = await open(path, { width: 390, height: 844 });
      const overflow = await page.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      expect(overflow, path).toBeLessThanOrEqual(0);
      await page.close();
    }
  });

  it('opens from the one-time link Ratchet printed, which signs in once; without signing in it is a login page (401)', async () => {
    const link = ratchet.output().match(/Console: (http:\S+\/login\?code=\S+)/)?.[1] as string;
    expect(link).toMatch(new RegExp(`^${ratchet.url}/login\\?code=`));
    const { page, requests } = await recordingPage(browser);
    page.on('close', () => requested.push(...requests));
    const first = await page.goto(link);
    expect(page.url()).toBe(`${ratchet.url}/`);
    expect(first?.status()).toBe(200);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'ratchet_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', secure: false });
    expect(cookie?.expires).toBeGreaterThan(Date.now() / 1000 + 11 * 3600);
    await page.close();

    const { page: other, requests: otherRequests } = await recordingPage(browser);
    other.on('close', () => requested.push(...otherRequests));
    expect((await other.goto(link))?.status()).toBe(401); // used once already
    expect(await other.locator('form[action="/login"] input[name=token]').count()).toBe(1);
    // It says how to get a new link, not to open the one that just expired.
    expect(await other.locator('p.FAILED').textContent()).toMatch(/For a new one run ratchet login/);
    expect((await other.goto(`${ratchet.url}/`))?.status()).toBe(401);
    await other.close();
  });

  it('signing in from a deep link lands on the page asked for; ratchet login prints a new link that does the same', async () => {
    await deliver('batch.succeeded', 'batches/deep', '2026-12-05T11:00:00Z');
    const { page, requests } = await recordingPage(browser);
    page.on('close', () => requested.push(...requests));
    expect((await page.goto(`${ratchet.url}/console/operations/batches/deep?refresh=60`))?.status()).toBe(401);
    await page.fill('input[name=token]', ratchet.apiToken as string);
    await Promise.all([page.waitForURL(`${ratchet.url}/console/operations/batches/deep?refresh=60`), page.click('button[type=submit]')]);
    expect(await page.locator('h1').textContent()).toContain('batches/deep');
    await page.close();

    const login = await runToExit(
      [process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'login', '--next', '/?state=SUCCEEDED'],
      {
        PATH: process.env.PATH ?? '',
        RATCHET_URL: ratchet.url,
        RATCHET_API_TOKEN: ratchet.apiToken as string,
      },
    );
    expect(login.code).toBe(0);
    const fresh = login.output.match(/^Console: (http:\S+\/login\?code=\S+) \(signs in once, within 15 minutes\)$/m)?.[1] as string;
    expect(fresh).toBeDefined();
    const { page: second, requests: secondRequests } = await recordingPage(browser);
    second.on('close', () => requested.push(...secondRequests));
    await second.goto(fresh);
    expect(second.url()).toBe(`${ratchet.url}/?state=SUCCEEDED`);
    await second.close();
    // Without the token: refused, nothing printed but one line.
    const refused = await runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'login'], {
      PATH: process.env.PATH ?? '',
      RATCHET_URL: ratchet.url,
      RATCHET_API_TOKEN: 'not-the-token-0123456789',
    });
    expect({ code: refused.code, lines: refused.output.trim().split('\n').length }).toEqual({ code: 1, lines: 1 });
  });

  it('refuses to be framed, and a signed-in page cannot change anything without its CSRF token', async () => {
    const { createServer } = await import('node:http');
    const framing = createServer((_req, res) =>
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<iframe src="${ratchet.url}/"></iframe>`),
    );
    await new Promise<void>((resolve) => framing.listen(0, '127.0.0.1', resolve));
    try {
      const page = await open('/');
      const headers = (await page.goto(`${ratchet.url}/`))?.headers() ?? {};
      expect(headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(headers['x-frame-options']).toBe('DENY');
      expect(headers['cache-control']).toBe('no-store');
      await page.goto(`http://127.0.0.1:${(framing.address() as { port: number }).port}/`);
      const frame = page.frames().find((f) => f !== page.mainFrame());
      await page.waitForTimeout(300);
      // Chromium puts its error page where a refused frame would be: the console is not in it.
      expect(frame?.url()).not.toBe(`${ratchet.url}/`);
      expect(
        await frame
          ?.locator('#operations')
          .count()
          .catch(() => 0),
      ).toBe(0);

      // Same origin and signed in, but no x-csrf-token: what a forged form or script would send.
      await page.goto(`${ratchet.url}/`);
      const status = await page.evaluate(async () => {
        const response = await fetch('/effects/redrive', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
        return response.status;
      });
      expect(status).toBe(401);
      await page.close();
    } finally {
      framing.close();
    }
  });

  it('answers 404 and 400 pages for an unknown operation and a bad name', async () => {
    expect((await ratchet.api(`/console/operations/batches/nobody`)).status).toBe(404);
    expect((await ratchet.api(`/console/operations/files/x`)).status).toBe(400);
    const html = await (await ratchet.api(`/console/operations/batches/nobody`)).text();
    expect(html).toContain('No operation named');
  });
});
