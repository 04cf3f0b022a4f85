/**
 * The README's app snippets as they stand, in an app made the way the README
 * says (`npm init -y`, which writes `"type": "commonjs"`), on the packed
 * tarballs: `app.mjs` creates a batch through `@google/genai` (pointed at the
 * fake Gemini by the SDK's own GOOGLE_GEMINI_BASE_URL) and waits for it;
 * `app.cjs` waits for it from CommonJS. Ratchet is the packed server, run
 * with `npx ratchet start`. `server.mjs` mounts the packed server's
 * `createRatchet` in an Express app and hears a signed webhook's change.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type FreshApp, freshApp, locked } from '../support/fresh-app.ts';
import { collectOutput } from '../support/output.ts';
import { freePort } from '../support/postgres.ts';
import { PROJECT_ROOT, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const tarballs = inject('tarballs');
const KEY = 'readme-key';
let gemini: FakeGemini;
let server: FreshApp;
let app: FreshApp;
let ratchet: RatchetProcess;

/** The README's ```js block whose first line is `// <file>`. */
function snippet(file: string): string {
  const readme = readFileSync(join(PROJECT_ROOT, 'README.md'), 'utf8');
  const block = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1] as string).find((b) => b.startsWith(`// ${file}\n`));
  if (!block) throw new Error(`the README has no js block for ${file}`);
  return block;
}

beforeAll(async () => {
  gemini = await new FakeGemini(KEY).start();
  server = await freshApp('readme-server', [tarballs.server as string], {});
  ratchet = await startRatchet(
    { GEMINI_API_KEY: KEY, GEMINI_BASE_URL: gemini.baseUrl, RECONCILE_INTERVAL_SECONDS: '0.5' },
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
