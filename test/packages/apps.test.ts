/**
 * Apps outside the repository, on the installed tarballs only: a server run
 * with `npx ratchet start` from its own install, with the fake Gemini; then a
 * plain JavaScript ESM app, a CommonJS app and a strict TypeScript app
 * (examples/app and examples/receiver-lambda, type-checked under node16,
 * nodenext and bundler resolution, compiled, run). Each tracks a job, reads
 * it, waits for its end and verifies the signed effect it receives.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { freePort } from '../support/aws/moto.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type FreshApp, freshApp, locked, run } from '../support/fresh-app.ts';
import { collectOutput } from '../support/output.ts';
import { PROJECT_ROOT, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const tarballs = inject('tarballs');
const KEY = 'packages-key';
const outbound = newSecret();
let gemini: FakeGemini;
let server: FreshApp;
let ratchet: RatchetProcess;
let receiverPort: number;

beforeAll(async () => {
  gemini = await new FakeGemini(KEY).start();
  receiverPort = await freePort();
  server = await freshApp('server', [tarballs.server as string], {});
  ratchet = await startRatchet(
    {
      GEMINI_API_KEY: KEY,
      GEMINI_BASE_URL: gemini.baseUrl,
      RECONCILE_INTERVAL_SECONDS: '1',
      EFFECTS_WEBHOOK_URL: `http://127.0.0.1:${receiverPort}/effects`,
      EFFECTS_SIGNING_SECRET: outbound,
      // The apps take turns on one receiver port: an effect that finds it closed is tried again soon.
      EFFECTS_RETRY_BASE_MS: '100',
      EFFECTS_RETRY_MAX_MS: '500',
    },
    { command: ['npx', '--no-install', 'ratchet', 'start'], cwd: server.dir },
  );
});

afterAll(async () => {
  await ratchet?.stop();
  await gemini?.stop();
  server?.remove();
});

/** Runs an app to its end; flips its job to SUCCEEDED in the fake Gemini once the app is waiting on it. */
async function runApp(app: FreshApp, args: string[], env: Record<string, string>, waiting: RegExp) {
  const child = spawn(process.execPath, args, {
    cwd: app.dir,
    env: {
      PATH: process.env.PATH,
      RATCHET_URL: ratchet.url,
      RATCHET_API_TOKEN: ratchet.apiToken as string,
      EFFECTS_SIGNING_SECRET: outbound,
      RECEIVER_PORT: String(receiverPort),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = collectOutput(child);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  try {
    await eventually(() => waiting.test(output()) || child.exitCode !== null, 60_000, `${args.join(' ')} waiting on its job`).catch(
      (error: Error) => {
        throw new Error(`${error.message}; it printed:\n${output()}`);
      },
    );
    const name = output().match(waiting)?.[1];
    if (name) gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: new Date().toISOString() });
    return { code: await exited, output: output() };
  } finally {
    child.kill();
  }
}

describe('@ratchet/server, installed', () => {
  // 40 MB before the providers: their three SDKs (openai, @anthropic-ai/sdk, Bedrock's client) are bundled in, each a
  // chunk loaded only where its provider has a credential (about 1.4 MB with their maps).
  it('installs alone in at most 42 MB, with no AWS SDK package, aws-cdk-lib, esbuild, typescript or tsx', () => {
    const { packages, kilobytes } = server.installed();
    console.log(`@ratchet/server installed alone: ${packages.length} packages, ${Math.round(kilobytes)} KB on disk`);
    expect(packages).toEqual(expect.arrayContaining(['@ratchet/server', 'libsql', 'hono']));
    expect(packages.filter((p) => /^@aws-sdk\/|^@smithy\/|^aws-cdk-lib$|^esbuild$|^@esbuild\/|^typescript$|^tsx$/.test(p))).toEqual([]);
    expect(kilobytes).toBeLessThanOrEqual(42 * 1024);
  });

  it('npx ratchet start keeps its data in ./.ratchet-data of the folder it runs in', () => {
    expect(ratchet.dataFile).toBe(join(server.dir, '.ratchet-data', 'ratchet.db'));
    expect(existsSync(ratchet.dataFile)).toBe(true);
  });

  it('answers --help on every command, and bad usage with the usage on stderr and exit 2', async () => {
    const ratchetBin = (args: string[]) =>
      run('npx', ['--no-install', 'ratchet', ...args], { cwd: server.dir }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error: { code: number; stdout: string; stderr: string }) => error,
      );
    for (const command of ['start', 'demo', 'webhook', 'redrive', 'backup', 'login', 'migrate']) {
      const help = await ratchetBin([command, '--help']);
      expect({ command, code: help.code }).toEqual({ command, code: 0 });
      expect(help.stdout).toMatch(new RegExp(`^usage: .*ratchet ${command}`));
    }
    const top = await ratchetBin(['--help']);
    expect(top.code).toBe(0);
    // The installed package's own version.
    expect(await ratchetBin(['--version'])).toMatchObject({ code: 0, stdout: `ratchet 0.1.0 (node ${process.version})\n` });
    for (const [args, why] of [
      [[], 'no command given'],
      [['launch'], 'unknown command launch'],
      [['--verbose'], 'unknown option --verbose'],
      [['start', '--verbose'], "Unknown option '--verbose'"],
      // The AWS commands are @ratchet/cdk's ratchet-aws: said in one line, with the command to run.
      [['connect', '--stack', 'Ratchet'], 'npx ratchet-aws connect --stack NAME'],
      [['redrive', '--stack', 'Ratchet'], 'npx ratchet-aws redrive --stack Ratchet'],
    ] as const) {
      const bad = await ratchetBin([...args]);
      expect({ args, code: bad.code, stdout: bad.stdout }).toEqual({ args, code: 2, stdout: '' });
      expect(bad.stderr.trim().split('\n')).toHaveLength(1);
      expect(bad.stderr).toContain(why);
      expect(bad.stderr).toMatch(/\(usage: .*ratchet /);
    }
  });

  it('serves /metrics, and with an OTLP endpoint exports a delivery’s trace and the metrics from its own bundle', async () => {
    const exports: Array<{ path: string; body: Buffer }> = [];
    const collector = createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        exports.push({ path: request.url ?? '', body: Buffer.concat(chunks) });
        response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((done) => collector.listen(0, '127.0.0.1', done));
    const inbound = newSecret();
    const traced = await startRatchet(
      {
        DATA_DIR: join(server.dir, 'traced-data'),
        WEBHOOK_SIGNING_SECRETS: inbound,
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as AddressInfo).port}`,
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_METRIC_EXPORT_INTERVAL: '500',
      },
      { command: ['npx', '--no-install', 'ratchet', 'start'], cwd: server.dir },
    );
    try {
      const { body, headers } = signedDelivery(inbound, envelope('batch.succeeded', { id: 'packaged-trace' }));
      expect((await fetch(`${traced.url}/webhooks/gemini`, { method: 'POST', body, headers })).status).toBe(200);
      const carrying = (path: string, text: string) => exports.some((one) => one.path === path && one.body.includes(text));
      await eventually(
        () => carrying('/v1/traces', 'batches/packaged-trace') && carrying('/v1/metrics', 'ratchet_webhook_deliveries_total'),
        15_000,
        'the trace and the metrics exported',
      );
      expect(carrying('/v1/traces', 'ratchet.write')).toBe(true);
      const metrics = await traced.api('/metrics');
      expect(metrics.status).toBe(200);
      expect(await metrics.text()).toContain('ratchet_webhook_deliveries_total{decision="applied",reason=""} 1');
    } finally {
      await traced.stop();
      collector.close();
    }
  });
});

describe('apps on the installed @ratchet/client', () => {
  let app: FreshApp;
  beforeAll(async () => {
    app = await freshApp('client-js', [tarballs.client as string]);
    for (const file of ['flow.cjs', 'app.mjs', 'app.cjs']) app.copy(join(import.meta.dirname, 'apps', file), file);
  });
  afterAll(() => app?.remove());

  for (const [file, label] of [
    ['app.mjs', 'esm'],
    ['app.cjs', 'cjs'],
  ] as const) {
    it(`${file} (${label === 'esm' ? 'ESM, no loader' : 'CommonJS, require'}) tracks, reads, waits for the end and verifies the signed effect`, async () => {
      const job = `batches/pkg-${label}-${Date.now()}`;
      gemini.batches.set(job, { state: 'BATCH_STATE_RUNNING', updateTime: new Date().toISOString() });
      const { code, output } = await runApp(app, [file], { JOB: job }, /tracked (\S+) \(created: true\)/);
      expect(output).toContain(
        'bad url: true invalid-url: RatchetClient: url must be an http:// or https:// URL, got "ftp://ratchet.example"',
      );
      expect(output).toContain(`tracked ${job} (created: true)`);
      expect(output).toMatch(new RegExp(`read ${job}: (not yet observed|RUNNING)`));
      expect(output).toContain(`${job} ended SUCCEEDED`);
      expect(output).toMatch(new RegExp(`verified effect ${job}#\\d+ -> SUCCEEDED \\{"app":"${label}"\\}`));
      expect(code).toBe(0);
    });
  }
});

describe('a strict TypeScript app: examples/app and examples/receiver-lambda on the installed packages', () => {
  let app: FreshApp;
  beforeAll(async () => {
    app = await freshApp('typescript', [
      tarballs.client as string,
      tarballs.genai as string,
      locked('@google/genai'),
      locked('typescript'),
      locked('@types/node'),
      locked('@types/aws-lambda'),
    ]);
    app.copy(join(PROJECT_ROOT, 'examples/app/index.ts'), 'app/index.ts');
    app.copy(join(PROJECT_ROOT, 'examples/receiver-lambda/index.ts'), 'receiver-lambda/index.ts');
    app.copy(join(import.meta.dirname, 'apps', 'client-only.ts'), 'client-only/index.ts');
    const strict = { strict: true, skipLibCheck: false, target: 'ES2022', types: ['node'], noEmit: true };
    const variants = {
      node16: { module: 'node16', moduleResolution: 'node16' },
      nodenext: { module: 'nodenext', moduleResolution: 'nodenext' },
      bundler: { module: 'preserve', moduleResolution: 'bundler' },
    };
    // @google/genai's own declarations name the DOM's ErrorEvent: the app that uses it needs the DOM library (or skipLibCheck).
    for (const [name, options] of Object.entries(variants))
      app.write(
        `tsconfig.${name}.json`,
        JSON.stringify({
          compilerOptions: { ...strict, ...options, lib: ['ES2022', 'DOM'] },
          include: ['app', 'receiver-lambda', 'client-only'],
        }),
      );
    app.write(
      'tsconfig.client-only.json',
      JSON.stringify({
        compilerOptions: { ...strict, ...variants.nodenext, lib: ['ES2022'] },
        include: ['receiver-lambda', 'client-only'],
      }),
    );
  });
  afterAll(() => app?.remove());

  for (const resolution of ['node16', 'nodenext', 'bundler', 'client-only']) {
    const what = resolution === 'client-only' ? 'the client alone, without the DOM library' : `moduleResolution ${resolution}`;
    it(`type-checks with tsc --noEmit under ${what} (skipLibCheck off)`, async () => {
      await app.exec(process.execPath, ['node_modules/typescript/bin/tsc', '-p', `tsconfig.${resolution}.json`]);
    });
  }

  it('compiled with tsc and run with node: creates a batch tracked by trackJobs, waits for its end and verifies its effect', async () => {
    await app.exec(process.execPath, [
      'node_modules/typescript/bin/tsc',
      '-p',
      'tsconfig.nodenext.json',
      '--noEmit',
      'false',
      '--outDir',
      'build',
    ]);
    expect(existsSync(join(app.dir, 'build', 'app', 'index.js'))).toBe(true);
    const { code, output } = await runApp(
      app,
      ['build/app/index.js'],
      { GEMINI_API_KEY: KEY, GEMINI_BASE_URL: gemini.baseUrl, WAIT_TIMEOUT_MS: '60000' },
      // Reconcile polls each second: the first read may already see the batch PENDING.
      /(batches\/\S+) is (tracked, not yet observed|PENDING|RUNNING)/,
    );
    const name = output.match(/created (batches\/\S+), tracked by Ratchet/)?.[1] as string;
    expect(name).toBeDefined();
    expect(gemini.created.get(name)).toMatchObject({ batch: { displayName: 'ratchet-example' } });
    expect(output).toContain(`${name} ended SUCCEEDED`);
    expect(output).toMatch(new RegExp(`effect received: ${name}#\\d+ (- |PENDING )?-> SUCCEEDED`));
    expect(code).toBe(0);
  });

  it('answers --help and bad usage with one line', async () => {
    const help = await app.exec(process.execPath, ['build/app/index.js', '--help']);
    expect(help.stdout.trim().split('\n')).toHaveLength(1);
    const bad = await run(process.execPath, ['build/app/index.js'], { cwd: app.dir, env: { PATH: process.env.PATH } }).catch(
      (error: { code: number; stderr: string }) => error,
    );
    expect(bad).toMatchObject({ code: 2 });
    expect((bad as { stderr: string }).stderr.trim()).toMatch(/^usage: /);
  });
});
