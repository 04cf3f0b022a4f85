/**
 * `npm run demo` as a newcomer runs it: it starts, plays its story in plain
 * lines (each guarantee visible), ends on the race's page in the console,
 * where headless Chromium finds the refused poll and the duplicate with their
 * reasons, and Ctrl-C stops it with no process left behind.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { hostsBeyondLoopback, launchChromium, recordingPage } from '../support/browser.ts';
import { PROJECT_ROOT, startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

describe('npm run demo', () => {
  it('plays the story, shows it in the console, and stops cleanly on Ctrl-C', async () => {
    const demo = await startRatchet({}, { command: ['npm', 'run', 'demo'] });
    try {
      await eventually(() => demo.output().includes('Done:'), 60_000, 'the end of the story');
      const output = demo.output();
      expect(output).toContain('the slow poll landed after it: the state stays SUCCEEDED');
      expect(output).toContain('again: not applied: duplicate');
      expect(output).toMatch(/it answered \d+ attempts with 503 meanwhile/);
      expect(output).toContain('then an older "requires action": not applied: regress-from-terminal');
      expect(output).toContain('Done: 3 state changes, each delivered once, in order per operation.');
      expect(output.match(/receiver: /g)).toHaveLength(3);
      expect(output).not.toMatch(/\n\s+at /);
      // On a port of its own, and its three links as the README describes them.
      expect(demo.url).not.toBe('http://127.0.0.1:3000');
      expect(output).toMatch(new RegExp(`^Console \\(this link signs you in, once\\): ${demo.url}/login\\?code=`, 'm'));
      expect(output).toContain(`Every job, once signed in: ${demo.url}/ — Ctrl-C stops the demo.`);
      const console = await (await demo.api('/')).text();
      for (const name of ['batches/demo-race', 'interactions/demo-late']) expect(console).toContain(name);

      const racePage = output.match(
        /The race in the console, every event with its reason and each effect's delivery \(signs you in, once\): (http:\S+)/,
      )?.[1];
      expect(racePage).toMatch(new RegExp(`^${demo.url}/login\\?code=`));
      const browser = await launchChromium();
      try {
        const { page, requests } = await recordingPage(browser);
        await page.goto(racePage as string);
        expect(page.url()).toBe(`${demo.url}/console/operations/batches/demo-race`);
        const refused = await page.locator('#timeline tr.refused').allTextContents();
        expect(refused).toEqual([
          expect.stringMatching(/^.*ago\s*poll.*RUNNING.*refused: after the job ended \(regress-from-terminal\)/),
          expect.stringMatching(/^.*ago\s*webhook\s*hmac\s*msg_race.*SUCCEEDED.*refused: same delivery again \(duplicate\)/),
        ]);
        expect(await page.locator('#timeline tr.applied').count()).toBe(3); // tracked, RUNNING, SUCCEEDED
        // The receiver's outage is on the race's page: the first change delivered on a later attempt, after 503s
        // (the second waited behind it, in order, and went through on its first).
        // As the README's tour says: the attempt it went through on is one more than the 503s the demo counted.
        const refusals = Number(/it answered (\d+) attempts with 503 meanwhile/.exec(output)?.[1]);
        expect(refusals).toBeGreaterThan(0);
        expect(await page.locator('#timeline td.effect').allInnerTexts()).toEqual([
          '',
          `delivered on attempt ${refusals + 1}; before, answered 503 Service Unavailable`,
          'delivered',
          '',
          '',
        ]);
        const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');
        expect(readme).toContain(
          '`delivered on attempt N; before, answered 503 Service Unavailable`, N one more than the 503s step 3 counted',
        );
        expect(hostsBeyondLoopback(requests).map(String)).toEqual([]);
      } finally {
        await browser.close();
      }
    } finally {
      await demo.stop('SIGINT'); // throws if any process of its group is left
    }
  });
});
