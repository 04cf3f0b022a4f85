/**
 * The console in headless Chromium (Debian's `chromium`, driven by
 * playwright-core): operations just ingested are listed and filtered, an
 * operation's timeline opens, a dead-lettered effect shows and is re-driven.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const CHROMIUM = '/usr/bin/chromium';
const inbound = newSecret();
const outbound = newSecret();
let receiver: Receiver;
let ratchet: RatchetProcess;
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`);
  receiver = await new Receiver(outbound).start();
  ratchet = await startRatchet({
    DATA_DIR: ':memory:',
    WEBHOOK_SIGNING_SECRETS: inbound,
    EFFECTS_WEBHOOK_URL: receiver.url,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_RETRY_BASE_MS: '100',
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
});
afterAll(async () => {
  await browser?.close();
  await ratchet?.stop();
  await receiver?.stop();
});

async function deliver(type: string, id: string, time: string) {
  const { body, headers } = signedDelivery(inbound, envelope(type, { id }, time));
  expect((await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers })).status).toBe(200);
}
const historyLength = async (name: string) =>
  ((await (await fetch(`${ratchet.url}/operations/${name}/history`)).json()) as { history: unknown[] }).history.length;

describe('the console', () => {
  it('lists the operations just ingested, filters them, and opens a timeline', async () => {
    await deliver('interaction.requires_action', 'interactions/c1', '2026-11-30T10:00:01Z');
    await deliver('interaction.completed', 'interactions/c1', '2026-11-30T10:00:02Z');
    await deliver('batch.succeeded', 'batches/c2', '2026-11-30T10:00:03Z');
    await eventually(async () => (await historyLength('interactions/c1')) === 2, 15_000, 'history');
    await eventually(() => receiver.applied().length >= 3, 15_000, 'effects');

    const page = await browser.newPage();
    await page.goto(`${ratchet.url}/`);
    expect(await page.locator('tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-name')))).toEqual([
      'batches/c2',
      'interactions/c1',
    ]);
    await page.selectOption('select[name=kind]', 'interaction');
    await page.click('button');
    await page.waitForURL(/kind=interaction/);
    expect(await page.locator('tbody tr').count()).toBe(1);

    await page.click('a[href="/console/operations/interactions/c1"]');
    const timeline = await page.locator('#timeline tbody tr').allInnerTexts();
    expect(timeline).toHaveLength(2);
    expect(timeline[0]).toContain('– → REQUIRES_ACTION');
    expect(timeline[1]).toContain('REQUIRES_ACTION → SUCCEEDED');
    expect(await page.locator('#effects tbody tr').allInnerTexts()).toEqual([
      expect.stringMatching(/interactions\/c1#1\s+REQUIRES_ACTION\s+delivered/),
      expect.stringMatching(/interactions\/c1#2\s+SUCCEEDED\s+delivered/),
    ]);
    await page.close();
  });

  it('shows a dead-lettered effect, and its redrive button delivers it', async () => {
    receiver.mode = 'gone'; // 410: dead-lettered at once
    await deliver('batch.failed', 'batches/c3', '2026-11-30T10:00:04Z');
    const page = await browser.newPage();
    await eventually(
      async () => {
        await page.goto(`${ratchet.url}/console/operations/batches/c3`);
        return ((await page.locator('#effects').textContent()) ?? '').includes('dead-lettered');
      },
      15_000,
      'the dead letter on the page',
    );
    receiver.mode = 'ok';
    await page.click('#redrive');
    await page.waitForFunction("document.querySelector('#redrive')?.textContent?.startsWith('redriven')");
    await eventually(() => receiver.applied().some((d) => d.body.data.name === 'batches/c3'), 15_000, 'the redriven effect');
    await page.reload();
    expect(await page.locator('#effects').textContent()).toContain('delivered');
    await page.close();
  });

  it('answers 404 and 400 pages for an unknown operation and a bad name', async () => {
    expect((await fetch(`${ratchet.url}/console/operations/batches/nobody`)).status).toBe(404);
    expect((await fetch(`${ratchet.url}/console/operations/files/x`)).status).toBe(400);
    const html = await (await fetch(`${ratchet.url}/console/operations/batches/nobody`)).text();
    expect(html).toContain('No operation named');
  });
});
