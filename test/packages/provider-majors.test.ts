/**
 * `@ratchet/openai` and `@ratchet/anthropic` beside each SDK version their
 * peer range names (as genai-majors.test.ts does for `@ratchet/genai`): the
 * packed tarballs (with `@ratchet/client`) installed into an empty app that
 * already depends on the SDK, with no peer conflict; plain `node` imports
 * them, and `trackJobs` wraps the SDK's creates against the fake providers on
 * 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { type FakeOpenAI, startFakeOpenAI } from '../support/fake-openai.ts';
import { type FreshApp, freshApp, locked } from '../support/fresh-app.ts';

const tarballs = inject('tarballs');
let openai: FakeOpenAI;
let anthropic: FakeAnthropic;

beforeAll(async () => {
  openai = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
});
afterAll(async () => {
  await openai?.close();
  await anthropic?.close();
});

// The client is the real one (imported, constructed); the tracker records what trackJobs asks of it.
const OPENAI_APP = `
import OpenAI from 'openai';
import { RatchetClient } from '@ratchet/client';
import { trackJobs } from '@ratchet/openai';

const tracked = [];
new RatchetClient({ url: 'http://127.0.0.1:9' });
const openai = trackJobs(new OpenAI({ apiKey: process.env.KEY, baseURL: process.env.BASE_URL }), {
  track: async (name, options) => tracked.push({ name, ...options }),
});
const batch = await openai.batches.create({
  input_file_id: 'file-abc',
  endpoint: '/v1/chat/completions',
  completion_window: '24h',
  metadata: { order: 'A-17' },
});
const response = await openai.responses.create({ model: 'gpt-5', input: 'research', background: true });
const job = await openai.fineTuning.jobs.create({ model: 'gpt-4.1-mini', training_file: 'file-train' });
const run = await openai.evals.runs.create('eval_1', { data_source: { type: 'jsonl', source: { type: 'file_id', id: 'file-eval' } } });
// Videos where the SDK has them (6.x).
const video = openai.videos ? await openai.videos.create({ model: 'sora-2', prompt: 'a lighthouse' }) : undefined;
console.log(JSON.stringify({ batch: batch.id, response: response.id, job: job.id, run: run.id, video: video?.id, tracked }));
`;

const ANTHROPIC_APP = `
import Anthropic from '@anthropic-ai/sdk';
import { RatchetClient } from '@ratchet/client';
import { trackJobs } from '@ratchet/anthropic';

const tracked = [];
new RatchetClient({ url: 'http://127.0.0.1:9' });
const anthropic = trackJobs(new Anthropic({ apiKey: process.env.KEY, baseURL: process.env.BASE_URL }), {
  track: async (name, options) => tracked.push({ name, ...options }),
});
const requests = [{ custom_id: 'q1', params: { model: 'claude-sonnet-4-5', max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] } }];
const batch = await anthropic.messages.batches.create({ requests });
const beta = await anthropic.beta.messages.batches.create({ requests });
console.log(JSON.stringify({ batch: batch.id, beta: beta.id, tracked }));
`;

/** An app on `sdk` (name@version) with the package's tarball and the client installed beside it; runs `source`. */
async function runBeside(pkg: string, sdk: string, source: string, env: Record<string, string>) {
  // The app has the SDK first, as a real one would; then Ratchet's packages join it: npm refuses a peer conflict (ERESOLVE).
  const app: FreshApp = await freshApp(`${pkg}-${sdk.replace(/[@/]/g, '_')}`, [sdk]);
  try {
    await app.exec('npm', [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=error',
      tarballs[pkg] as string,
      tarballs.client as string,
    ]);
    const sdkName = sdk.slice(0, sdk.lastIndexOf('@'));
    const manifest = (
      await app.exec(process.execPath, ['-p', `require('fs').readFileSync('node_modules/${sdkName}/package.json', 'utf8')`])
    ).stdout;
    expect(JSON.parse(manifest).version).toBe(sdk.slice(sdk.lastIndexOf('@') + 1));
    app.write('app.mjs', source);
    const { stdout } = await app.exec(process.execPath, ['app.mjs'], env);
    return JSON.parse(stdout.trim().split('\n').at(-1) as string);
  } finally {
    app.remove();
  }
}

describe.each(['openai@5.0.0', locked('openai')])('@ratchet/openai beside %s', (sdk) => {
  it('installs without a peer conflict, and plain node runs an app whose creates are tracked', async () => {
    const result = await runBeside('openai', sdk, OPENAI_APP, { KEY: 'sk-majors', BASE_URL: openai.url });
    expect(result.tracked).toEqual([
      { name: `openai/batches/${result.batch}`, metadata: { order: 'A-17' } },
      { name: `openai/responses/${result.response}` },
      { name: `openai/fine_tuning/jobs/${result.job}` },
      { name: `openai/evals/eval_1/runs/${result.run}` },
      ...(result.video ? [{ name: `openai/videos/${result.video}` }] : []),
    ]);
    if (sdk.startsWith('openai@6')) expect(result.video).toBeDefined();
  });
});

describe.each(['@anthropic-ai/sdk@0.39.0', locked('@anthropic-ai/sdk')])('@ratchet/anthropic beside %s', (sdk) => {
  it('installs without a peer conflict, and plain node runs an app whose batches are tracked', async () => {
    const result = await runBeside('anthropic', sdk, ANTHROPIC_APP, { KEY: 'sk-ant-majors', BASE_URL: anthropic.url });
    expect(result.tracked).toEqual([
      { name: `anthropic/messages/batches/${result.batch}` },
      { name: `anthropic/messages/batches/${result.beta}` },
    ]);
  });
});
