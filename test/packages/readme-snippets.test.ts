/**
 * The README's app snippets as they stand, in an app made the way the README
 * says (`npm init -y`, which writes `"type": "commonjs"`), on the packed
 * tarballs: `app.mjs` creates a batch through `@google/genai` (pointed at the
 * fake Gemini by the SDK's own GOOGLE_GEMINI_BASE_URL) and waits for it;
 * `app.cjs` waits for it from CommonJS. Ratchet is the packed server, run
 * with `npx ratchet start`. `server.mjs` mounts the packed server's
 * `createRatchet` in an Express app and hears a signed webhook's change.
 * docs/apps.md's `openai.mjs` and `anthropic.mjs` likewise, on the packed
 * `@ratchet/openai` and `@ratchet/anthropic`, against the fake OpenAI and
 * Anthropic (the SDKs pointed at them by OPENAI_BASE_URL and ANTHROPIC_BASE_URL).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { anthropicBatch, type FakeAnthropic, startFakeAnthropic } from '../support/fake-anthropic.ts';
import { type FakeOpenAI, openaiBatch, startFakeOpenAI } from '../support/fake-openai.ts';
import { type FreshApp, freshApp, locked } from '../support/fresh-app.ts';
import { collectOutput } from '../support/output.ts';
import { freePort } from '../support/postgres.ts';
import { PROJECT_ROOT, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const tarballs = inject('tarballs');
const KEY = 'readme-key';
let gemini: FakeGemini;
let openai: FakeOpenAI;
let anthropic: FakeAnthropic;
let server: FreshApp;
let app: FreshApp;
let ratchet: RatchetProcess;

/** The ```js block of `doc` (the README unless named) whose first line is `// <file>`. */
function snippet(file: string, doc = 'README.md'): string {
  const readme = readFileSync(join(PROJECT_ROOT, doc), 'utf8');
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] as string).find((b) => b.startsWith(`// ${file}\n`));
  if (!block) throw new Error(`${doc} has no js block for ${file}`);
  return block;
}

beforeAll(async () => {
  gemini = await new FakeGemini(KEY).start();
  openai = await startFakeOpenAI();
  anthropic = await startFakeAnthropic();
  server = await freshApp('readme-server', [tarballs.server as string], {});
  ratchet = await startRatchet(
    {
      GEMINI_API_KEY: KEY,
      GEMINI_BASE_URL: gemini.baseUrl,
      // docs/apps.md's OpenAI and Anthropic snippets: their jobs polled on the fakes.
      OPENAI_API_KEY: KEY,
      OPENAI_BASE_URL: openai.url,
      ANTHROPIC_API_KEY: KEY,
      ANTHROPIC_BASE_URL: anthropic.url,
      RECONCILE_INTERVAL_SECONDS: '0.5',
    },
    { command: ['npx', '--no-install', 'ratchet', 'start'], cwd: server.dir },
  );
  // As the README says: npm init -y, then the SDK and the two tarballs.
  app = await freshApp('readme-app', [], {});
  await app.exec('npm', ['init', '-y']);
  expect(JSON.parse(readFileSync(join(app.dir, 'package.json'), 'utf8')).type).toBe('commonjs');
  await app.exec('npm', [
    'install',
    '--no-audit',
    '--no-fund',
    '--prefer-offline',
    '--loglevel=error',
    locked('@google/genai'),
    tarballs.client as string,
    tarballs.genai as string,
  ]);
});
afterAll(async () => {
  await ratchet?.stop();
  await gemini?.stop();
  await openai?.close();
  await anthropic?.close();
  server?.remove();
  app?.remove();
});

function runNode(args: string[]): { exited: Promise<number | null>; output: () => string } {
  const child = spawn(process.execPath, args, {
    cwd: app.dir,
    env: {
      PATH: process.env.PATH,
      RATCHET_URL: ratchet.url,
      RATCHET_API_TOKEN: ratchet.apiToken as string,
      GEMINI_API_KEY: KEY,
      GOOGLE_GEMINI_BASE_URL: gemini.baseUrl,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  return { exited: new Promise((resolve) => child.once('exit', resolve)), output };
}

describe("the README's app snippets, as they stand", () => {
  it('app.mjs tracks a batch at creation and waits for its end; app.cjs waits for it from CommonJS', async () => {
    app.write('app.mjs', snippet('app.mjs'));
    app.write('app.cjs', snippet('app.cjs'));
    const esm = runNode(['app.mjs']);
    await eventually(() => gemini.created.size > 0 || esm.output().length > 0, 30_000, 'the batch to be created');
    const name = [...gemini.created.keys()].find((n) => n.startsWith('batches/')) as string;
    expect(name).toBeDefined();
    const cjs = runNode(['app.cjs', name]);
    gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
    expect(await esm.exited).toBe(0);
    expect(esm.output().trim()).toBe(`${name} SUCCEEDED`);
    expect(await cjs.exited).toBe(0);
    expect(cjs.output().trim()).toBe(`${name} SUCCEEDED`);
  });

  it('server.mjs mounts Ratchet in an Express app: a signed webhook in, the change handed to onChange', async () => {
    await server.exec('npm', [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=error',
      locked('express'),
      locked('@hono/node-server'),
    ]);
    server.write('server.mjs', snippet('server.mjs'));
    const secret = newSecret();
    const port = await freePort();
    const child = spawn(process.execPath, ['server.mjs'], {
      cwd: server.dir,
      // In memory: the folder's .ratchet-data belongs to the ratchet start above.
      env: {
        PATH: process.env.PATH,
        PORT: String(port),
        WEBHOOK_SIGNING_SECRETS: secret,
        DATA_DIR: ':memory:',
        POWERTOOLS_LOG_LEVEL: 'ERROR',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = collectOutput(child);
    try {
      const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: 'batches/readme-mounted' }));
      await eventually(
        async () => {
          const answer = await fetch(`http://127.0.0.1:${port}/ratchet/webhooks/gemini`, { method: 'POST', headers, body }).catch(
            () => undefined,
          );
          return answer?.status === 200;
        },
        30_000,
        `the webhook answered 200 (${output().slice(-300)})`,
      );
      await eventually(() => output().includes('changed batches/readme-mounted#1 SUCCEEDED'), 10_000, 'onChange');
    } finally {
      child.kill();
    }
  });
});

describe("docs/apps.md's OpenAI and Anthropic snippets, as they stand", () => {
  let providers: FreshApp;
  beforeAll(async () => {
    providers = await freshApp('apps-providers', [], {});
    await providers.exec('npm', ['init', '-y']);
    await providers.exec('npm', [
      'install',
      '--no-audit',
      '--no-fund',
      '--prefer-offline',
      '--loglevel=error',
      locked('openai'),
      locked('@anthropic-ai/sdk'),
      tarballs.client as string,
      tarballs.openai as string,
      tarballs.anthropic as string,
    ]);
  });
  afterAll(() => providers?.remove());

  /** Runs a snippet in the app with the SDKs pointed at the fakes, as a user's environment would point them at the providers. */
  function runSnippet(args: string[]) {
    const child = spawn(process.execPath, args, {
      cwd: providers.dir,
      env: {
        PATH: process.env.PATH,
        RATCHET_URL: ratchet.url,
        RATCHET_API_TOKEN: ratchet.apiToken as string,
        OPENAI_API_KEY: KEY,
        OPENAI_BASE_URL: openai.url,
        ANTHROPIC_API_KEY: KEY,
        ANTHROPIC_BASE_URL: anthropic.url,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = collectOutput(child);
    return { exited: new Promise<number | null>((resolve) => child.once('exit', resolve)), output };
  }
  const created = (requests: Array<{ method: string; path: string }>, collection: string) =>
    requests.some((r) => r.method === 'POST' && r.path === collection);

  it('openai.mjs tracks a batch at creation and waits for its end', async () => {
    providers.write('openai.mjs', snippet('openai.mjs', 'docs/apps.md'));
    const run = runSnippet(['openai.mjs', 'file-abc']);
    await eventually(() => created(openai.requests, '/v1/batches') || run.output().length > 0, 30_000, 'the batch to be created');
    const batchId = ((await fetchJson(`${openai.url}/batches`)).data as Array<{ id: string }>)[0]?.id as string;
    const name = `openai/batches/${batchId}`;
    // Tracked before create returned, with the request's metadata.
    await eventually(async () => (await ratchetGet(name))?.userMetadata?.order === 'A-17', 10_000, `${name} tracked (${run.output()})`);
    openai.set('batch', { ...openaiBatch({ status: 'completed' }), id: batchId });
    expect(await run.exited).toBe(0);
    expect(run.output().trim()).toBe(`${name} SUCCEEDED`);
  });

  it('anthropic.mjs tracks a Message Batch at creation and waits for its end', async () => {
    providers.write('anthropic.mjs', snippet('anthropic.mjs', 'docs/apps.md'));
    const run = runSnippet(['anthropic.mjs']);
    await eventually(() => created(anthropic.requests, '/v1/messages/batches') || run.output().length > 0, 30_000, 'the batch');
    const listed = await fetchJson(`${anthropic.url}/v1/messages/batches`, { 'x-api-key': KEY });
    const batchId = (listed.data as Array<{ id: string }>)[0]?.id as string;
    const name = `anthropic/messages/batches/${batchId}`;
    await eventually(async () => (await ratchetGet(name))?.kind === 'anthropic-batch', 10_000, `${name} tracked (${run.output()})`);
    const now = new Date().toISOString();
    anthropic.set(
      anthropicBatch({
        id: batchId,
        processing_status: 'ended',
        ended_at: now,
        request_counts: { processing: 0, succeeded: 1, errored: 0, canceled: 0, expired: 0 },
      }),
    );
    expect(await run.exited).toBe(0);
    expect(run.output().trim()).toBe(`${name} SUCCEEDED`);
  });
});

async function fetchJson(url: string, headers: Record<string, string> = { authorization: `Bearer ${KEY}` }) {
  return (await (await fetch(url, { headers })).json()) as Record<string, unknown>;
}

async function ratchetGet(name: string): Promise<{ kind?: string; userMetadata?: Record<string, unknown> } | undefined> {
  const answer = await fetch(`${ratchet.url}/operations/${name}`, { headers: { authorization: `Bearer ${ratchet.apiToken}` } });
  return answer.status === 200 ? ((await answer.json()) as { kind?: string; userMetadata?: Record<string, unknown> }) : undefined;
}
