/**
 * Headless Chromium (Debian's `chromium`, driven by playwright-core) for the
 * console's tests, and a record of every request a page makes, so a test can
 * prove nothing leaves 127.0.0.1.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium, type Page } from 'playwright-core';

const CHROMIUM = '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (.ci/run does)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
}

/** A new page whose requests (every URL it asked for, in order) are kept in `requests`. */
export async function recordingPage(
  browser: Browser,
  viewport = { width: 1280, height: 900 },
): Promise<{ page: Page; requests: string[] }> {
  const page = await browser.newPage({ viewport });
  const requests: string[] = [];
  page.on('request', (request) => {
    requests.push(request.url());
  });
  return { page, requests };
}

/** The hosts a page's requests went to, other than 127.0.0.1 (and `data:`/`about:` URLs, which go nowhere). */
export const hostsBeyondLoopback = (requests: string[]) =>
  requests.map((url) => new URL(url)).filter((url) => /^https?:$/.test(url.protocol) && url.hostname !== '127.0.0.1');

/** Signs a page's browser context in to a Ratchet's console with its API token, as a person pastes it into /login. */
export async function signIn(page: Page, baseUrl: string, token: string): Promise<void> {
  await page.goto(`${baseUrl}/login`);
  await page.fill('input[name=token]', token);
  await Promise.all([page.waitForURL(`${baseUrl}/`), page.click('button[type=submit]')]);
}
