/**
 * `npm run demo` as a newcomer runs it: it starts, plays its story in plain
 * lines (each guarantee visible), serves the console, and Ctrl-C stops it with
 * no process left behind.
 */
import { describe, expect, it } from 'vitest';
import { startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

describe('npm run demo', () => {
  it('plays the story, shows it in the console, and stops cleanly on Ctrl-C', async () => {
    const demo = await startRatchet({}, { command: ['npm', 'run', 'demo'] });
    try {
      await eventually(() => demo.output().includes('Done:'), 60_000, 'the end of the story');
      const output = demo.output();
      expect(output).toContain('the slow poll landed after it: the state stays SUCCEEDED');
      expect(output).toContain('again: not applied: duplicate');
      expect(output).toContain('then an older "requires action": not applied: regress-from-terminal');
      expect(output).toContain('Done: 5 state changes, each delivered once, in order per operation.');
      expect(output.match(/receiver: /g)).toHaveLength(5);
      expect(output).not.toMatch(/\n\s+at /);
      const console = await (await fetch(`${demo.url}/`)).text();
      for (const name of ['batches/demo-race', 'interactions/demo-late', 'interactions/demo-outage']) expect(console).toContain(name);
    } finally {
      await demo.stop('SIGINT'); // throws if any process of its group is left
    }
  });
});
