/**
 * `@ratchet/genai` beside each major of `@google/genai` an app may have: the
 * packed tarballs (with `@ratchet/client`) installed into an empty app that
 * already depends on the SDK, with no peer conflict; plain `node` imports them,
 * and `trackJobs` wraps the SDK's creates (a batch and a background
 * interaction, against the fake Gemini on 127.0.0.1).
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { type FreshApp, freshApp } from '../support/fresh-app.ts';

const tarballs = inject('tarballs');
const KEY = 'majors-key';
let gemini: FakeGemini;

beforeAll(async () => {
  gemini = await new FakeGemini(KEY).start();
});
afterAll(async () => {
  await gemini?.stop();
});

const APP = `
import { GoogleGenAI } from '@google/genai';
import { RatchetClient } from '@ratchet/client';
import { trackJobs } from '@ratchet/genai';

const tracked = [];
// The client is the real one (imported, constructed); the tracker records what trackJobs asks of it.
new RatchetClient({ url: 'http://127.0.0.1:9' });
const ai = trackJobs(new GoogleGenAI({ apiKey: process.env.KEY, httpOptions: { baseUrl: process.env.BASE_URL } }), {
  track: async (name, options) => tracked.push({ name, ...options }),
});
const batch = await ai.batches.create({
  model: 'gemini-2.5-flash',
  src: { inlinedRequests: [{ contents: [{ parts: [{ text: 'hi' }], role: 'user' }] }] },
});
const interaction = await ai.interactions.create({ model: 'gemini-2.5-flash', input: 'research', background: true });
// File Search imports where the SDK has them (3.x): tracked before the call returns, like every other job.
const imported = ai.fileSearchStores?.importFile
  ? await ai.fileSearchStores.importFile({ fileSearchStoreName: 'fileSearchStores/docs', fileName: 'files/a' })
  : undefined;
console.log(JSON.stringify({ node: process.version, batch: batch.name, interaction: interaction.id, imported: imported?.name, tracked }));
`;

describe.each(['2.32.0', '3.6.1'])('@ratchet/genai beside @google/genai %s', (version) => {
  let app: FreshApp;
  beforeAll(async () => {
    // The app has the SDK first, as a real one would; then Ratchet's packages join it: npm refuses a peer conflict (ERESOLVE).
    app = await freshApp(`genai-${version}`, [`@google/genai@${version}`]);
    await app.exec('npm', [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=error',
      tarballs.genai as string,
      tarballs.client as string,
    ]);
  });
  afterAll(() => app?.remove());

  it('installs without a peer conflict, and plain node runs an app whose creates are tracked', async () => {
    const installed = app.installed().packages;
    expect(installed).toEqual(expect.arrayContaining(['@google/genai', '@ratchet/genai', '@ratchet/client']));
    const manifest = (
      await app.exec(process.execPath, ['-p', "require('fs').readFileSync('node_modules/@google/genai/package.json', 'utf8')"])
    ).stdout;
    expect(JSON.parse(manifest).version).toBe(version);
    app.write('app.mjs', APP);
    const { stdout } = await app.exec(process.execPath, ['app.mjs'], { KEY, BASE_URL: gemini.baseUrl });
    const result = JSON.parse(stdout.trim().split('\n').at(-1) as string);
    expect(result.node).toBe(process.version);
    expect(result.tracked).toEqual([
      { name: result.batch },
      { name: `interactions/${result.interaction}` },
      ...(result.imported ? [{ name: result.imported }] : []),
    ]);
    if (version.startsWith('3.')) expect(result.imported).toMatch(/^fileSearchStores\/docs\/operations\//);
    expect(result.batch).toMatch(/^batches\//);
  });
});
