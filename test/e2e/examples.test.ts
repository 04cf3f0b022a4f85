/**
 * The examples run as a user runs them, importing Ratchet by its package
 * name (`ratchet/client`, …): the app against the local runtime and the fake
 * Gemini (create with trackJobs, waitFor, the signed effect verified), and the
 * CDK app through `cdk synth`.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../lambda/config.ts';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { type LocalRuntime, startLocalRuntime } from '../../local/runtime.ts';
import { freePort } from '../support/aws/moto.ts';
import { newSecret } from '../support/deliveries.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const KEY = 'examples-key';
const outbound = newSecret();
const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-examples-'));
let gemini: FakeGemini;
let runtime: LocalRuntime;
let receiverPort: number;

beforeAll(async () => {
  gemini = await new FakeGemini(KEY).start();
  receiverPort = await freePort();
  runtime = await startLocalRuntime(
    loadConfig({
      DATA_DIR: dataDir,
      PORT: '0',
      GEMINI_API_KEY: KEY,
      GEMINI_BASE_URL: gemini.baseUrl,
      RECONCILE_INTERVAL_SECONDS: '1',
      EFFECTS_WEBHOOK_URL: `http://127.0.0.1:${receiverPort}/effects`,
      EFFECTS_SIGNING_SECRET: outbound,
    }),
  );
});

afterAll(async () => {
  await runtime?.stop();
  await gemini?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

function run(file: string, args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], {
    cwd: PROJECT_ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => {
    stdout += chunk;
  });
  child.stderr.on('data', (chunk) => {
    stderr += chunk;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

describe('examples/app', () => {
  it('creates a batch tracked at creation, waits for its end and verifies its effect', async () => {
    const app = run('examples/app/index.ts', [], {
      RATCHET_URL: runtime.url,
      GEMINI_API_KEY: KEY,
      GEMINI_BASE_URL: gemini.baseUrl,
      EFFECTS_SIGNING_SECRET: outbound,
      RECEIVER_PORT: String(receiverPort),
      WAIT_TIMEOUT_MS: '60000',
    });
    try {
      // The batch Gemini is running for it finishes a little later.
      await eventually(() => gemini.created.size > 0, 20_000, 'the batch created');
      const [name] = [...gemini.created.keys()] as [string];
      await eventually(() => app.output().stdout.includes(`${name} is tracked, not yet observed`), 20_000, 'waiting on the tracked job');
      gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
      expect(await app.exited).toBe(0);
      const { stdout } = app.output();
      expect(stdout).toContain(`created ${name}, tracked by Ratchet`);
      expect(stdout).toContain(`${name} ended SUCCEEDED`);
      expect(stdout).toMatch(new RegExp(`effect received: ${name}#\\d+ (- |PENDING )?-> SUCCEEDED`));
      expect(gemini.created.get(name)).toMatchObject({ batch: { displayName: 'ratchet-example' } });
    } finally {
      app.child.kill();
    }
  });

  it('answers --help and bad usage with one line', async () => {
    const help = run('examples/app/index.ts', ['--help'], {});
    expect(await help.exited).toBe(0);
    expect(help.output().stdout.trim().split('\n')).toHaveLength(1);
    const bad = run('examples/app/index.ts', [], {});
    expect(await bad.exited).toBe(2);
    expect(bad.output().stderr.trim()).toMatch(/^usage: /);
  });
});

describe('examples/cdk-app', () => {
  it('synthesizes an app of its own with Ratchet, a rule for succeeded batches, and a function allowed to track and read', async () => {
    const out = mkdtempSync(join(tmpdir(), 'ratchet-cdk-example-'));
    try {
      await promisify(execFile)('npx', ['cdk', 'synth', '--no-notices', '-q', '-o', out], {
        cwd: join(PROJECT_ROOT, 'examples/cdk-app'),
        env: { ...process.env, CDK_DISABLE_VERSION_CHECK: 'true' },
      });
      const template = JSON.parse(readFileSync(join(out, 'MyApp.template.json'), 'utf8'));
      const resources = Object.values(template.Resources) as Array<{ Type: string; Properties: Record<string, unknown> }>;
      const rules = resources.filter((r) => r.Type === 'AWS::Events::Rule' && r.Properties.EventBusName);
      expect(rules.map((r) => r.Properties.EventPattern)).toEqual([
        { source: ['ratchet'], 'detail-type': ['Operation State Changed'], detail: { kind: ['batch'], state: ['SUCCEEDED'] } },
      ]);
      const invokes = JSON.stringify(resources.filter((r) => r.Type === 'AWS::IAM::Policy').map((r) => r.Properties.PolicyDocument));
      expect(invokes).toContain('execute-api:Invoke');
      expect(invokes).toContain('/$default/POST/operations');
      expect(invokes).toContain('/$default/GET/operations/*');
      expect(Object.keys(template.Outputs)).toContain('ApiUrl');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('a git install', () => {
  it('installs Ratchet from git into an app, imports every entry point, and synthesizes the construct from node_modules', async () => {
    // What `npm install git+https://…/ratchet.git` does, from this checkout's last commit.
    const app = mkdtempSync(join(tmpdir(), 'ratchet-git-install-'));
    try {
      writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'my-app', private: true, type: 'module' }));
      await promisify(execFile)('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', `git+file://${PROJECT_ROOT}`], {
        cwd: app,
      });
      writeFileSync(
        join(app, 'app.mts'),
        `import { App, Stack } from 'aws-cdk-lib';
import { Ratchet } from 'ratchet/cdk';
import { RatchetClient } from 'ratchet/client';
import { trackJobs } from 'ratchet/genai';
import { verifyEffect } from 'ratchet/receiver';
const app = new App({ outdir: 'cdk.out' });
new Ratchet(new Stack(app, 'Mine'), 'Ratchet');
app.synth();
console.log([RatchetClient, trackJobs, verifyEffect].map((f) => typeof f).join(' '));
`,
      );
      // The app runs TypeScript the way Ratchet's own commands do (tsx: here, this checkout's).
      const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
      const { stdout } = await promisify(execFile)(process.execPath, ['--import', tsx, 'app.mts'], { cwd: app });
      expect(stdout.trim().split('\n').at(-1)).toBe('function function function');
      const template = JSON.parse(readFileSync(join(app, 'cdk.out/Mine.template.json'), 'utf8'));
      const functions = Object.values(template.Resources as Record<string, { Type: string }>).filter(
        (r) => r.Type === 'AWS::Lambda::Function',
      );
      expect(functions).toHaveLength(4);
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  }, 180_000);
});
