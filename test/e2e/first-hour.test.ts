/**
 * The first hour's friction, each fixed and held here through `npm start` and
 * `npm run webhook` as processes: the development secret survives a restart,
 * the webhook CLI says what happened (exit code, one line when Ratchet is not
 * there, --id, --update-time, --data; OpenAI's and Azure OpenAI's shape with
 * --provider), a port in use is one line with nothing
 * left running, the logs carry no idle
 * reconcile lines and no empty sampling field, the sink's first start says
 * how much backlog it delivers (and nothing on a fresh folder, which has none).
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEV_SECRET_FILE } from '../../engines/sqlite/data-folder.ts';
import { newSecret } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PROJECT_ROOT, type RatchetProcess, runToExit, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const outbound = newSecret();
const openaiSecret = newSecret();
const azureSecret = newSecret();

const dataDir = mkdtempSync(join(tmpdir(), 'ratchet-first-hour-'));
let gemini: FakeGemini;
let ratchet: RatchetProcess;
const env = () => ({
  DATA_DIR: dataDir,
  WEBHOOK_SIGNING_SECRETS: '',
  GEMINI_API_KEY: gemini.apiKey,
  GEMINI_BASE_URL: gemini.baseUrl,
  RECONCILE_INTERVAL_SECONDS: '0.2',
  POWERTOOLS_LOG_LEVEL: 'INFO',
  OPENAI_WEBHOOK_SECRET: openaiSecret,
  AZURE_OPENAI_ENDPOINT: 'https://tour.openai.azure.com',
  AZURE_OPENAI_WEBHOOK_SECRET: azureSecret,
});

beforeAll(async () => {
  gemini = await new FakeGemini('first-hour-key').start();
  ratchet = await startRatchet(env());
});
afterAll(async () => {
  await ratchet?.stop();
  await gemini?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

function webhook(args: string[], extra: Record<string, string> = {}) {
  return runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/webhook.ts'), ...args], {
    PATH: process.env.PATH ?? '',
    RATCHET_URL: ratchet.url,
    WEBHOOK_SIGNING_SECRETS: ratchet.devSecret as string,
    ...extra,
  });
}

describe('the first hour', () => {
  it('keeps the development secret in the data folder (owner-only) and reuses it after a restart', async () => {
    const before = ratchet.devSecret;
    expect(before).toMatch(/^whsec_/);
    const file = join(dataDir, DEV_SECRET_FILE);
    expect(readFileSync(file, 'utf8').trim()).toBe(before);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    await ratchet.stop();
    ratchet = await startRatchet(env());
    expect(ratchet.devSecret).toBe(before);
    expect((await webhook(['batch.succeeded', 'batches/after-restart'])).code).toBe(0);
    // Without WEBHOOK_SIGNING_SECRETS, npm run webhook signs with the secret of the data folder it points at.
    const fromFolder = await webhook(['batch.succeeded', 'batches/from-data-dir'], { WEBHOOK_SIGNING_SECRETS: '', DATA_DIR: dataDir });
    expect(fromFolder.output).toMatch(/^200 .*"applied":true/);
    const elsewhere = await webhook(['batch.succeeded', 'batches/x'], { WEBHOOK_SIGNING_SECRETS: '', DATA_DIR: join(dataDir, 'none') });
    expect(elsewhere.code).toBe(2);
    expect(elsewhere.output).toContain('holds no development secret');
  });

  it('npm run webhook: exit 0 on 2xx, 1 on 401, one line when nothing listens; --id repeats a delivery, --update-time and --data shape it', async () => {
    const applied = await webhook([
      'batch.failed',
      'batches/cli',
      '--id',
      'msg_cli',
      '--update-time',
      '2026-11-30T10:00:00.5Z',
      '--data',
      '{"error":{"code":13,"message":"boom"}}',
    ]);
    expect(applied.code).toBe(0);
    expect(applied.output).toMatch(/^200 .*"applied":true/);
    const again = await webhook(['batch.failed', 'batches/cli', '--id', 'msg_cli', '--update-time', '2026-11-30T10:00:00.5Z']);
    expect(again.output).toContain('"reason":"duplicate"');
    const record = await (await ratchet.api(`/operations/batches/cli`)).json();
    expect(record).toMatchObject({
      state: 'FAILED',
      updateTime: '2026-11-30T10:00:00.500000000Z',
      result: { error: { code: 13, message: 'boom' } },
    });

    const refused = await webhook(['batch.succeeded', 'batches/cli-2'], { WEBHOOK_SIGNING_SECRETS: 'whsec_d3Jvbmd3cm9uZ3dyb25nd3Jvbmc=' });
    expect(refused.code).toBe(1);
    expect(refused.output).toMatch(/^401 /);
    // Which Ratchet refused, and which secret signed.
    expect(refused.output).toContain(
      `ratchet webhook: ${ratchet.url}/webhooks/gemini refused the signature: it was signed with WEBHOOK_SIGNING_SECRETS`,
    );
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const free = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const nobody = await webhook(['batch.succeeded', 'batches/cli-3'], { RATCHET_URL: `http://127.0.0.1:${free}` });
    expect(nobody.code).toBe(1);
    expect(nobody.output.trim().split('\n')).toEqual([
      `ratchet webhook: cannot reach http://127.0.0.1:${free}/webhooks/gemini: connection refused (ECONNREFUSED); is Ratchet running there? (RATCHET_URL says where)`,
    ]);
    expect((await webhook(['batch.succeeded'])).code).toBe(2);
    expect((await webhook(['batch.succeeded', 'batches/x', '--data', '[1]'])).output).toContain('--data must be a JSON object');
  });

  it('npm run webhook: a typo in the type, a RATCHET_URL that is no URL and a secret that does not decode are bad usage (exit 2), each in one line', async () => {
    const typo = await webhook(['batch.succeded', 'batches/1']);
    expect(typo.code).toBe(2);
    expect(typo.output.trim().split('\n')).toEqual([
      expect.stringMatching(/^ratchet webhook: unknown event type "batch.succeded": one of batch.succeeded, batch.failed, .*webhook.ping/),
    ]);
    const help = await webhook(['--help']);
    expect(help.code).toBe(0);
    expect(help.output).toContain('interaction.requires_action');
    const notUrl = await webhook(['batch.succeeded', 'batches/1'], { RATCHET_URL: '127.0.0.1:3100' });
    expect({ code: notUrl.code, output: notUrl.output.trim() }).toEqual({
      code: 2,
      output: expect.stringMatching(
        /^ratchet webhook: RATCHET_URL must be an http\(s\) URL such as http:\/\/127.0.0.1:3000, not "127.0.0.1:3100"/,
      ),
    });
    const badSecret = await webhook(['batch.succeeded', 'batches/1'], { WEBHOOK_SIGNING_SECRETS: 'whsec_abc' });
    expect({ code: badSecret.code, output: badSecret.output.trim() }).toEqual({
      code: 2,
      output: expect.stringMatching(/^ratchet webhook: WEBHOOK_SIGNING_SECRETS: its secret is not of the form whsec_<base64>/),
    });
    expect(badSecret.output).not.toContain('whsec_abc');
  });

  it('npm run webhook --provider openai: an OpenAI event signed with OPENAI_WEBHOOK_SECRET to /webhooks/openai (azure-openai: its own), --id repeating it', async () => {
    const openai = { OPENAI_WEBHOOK_SECRET: openaiSecret };
    const args = ['--provider', 'openai', 'batch.completed', 'batch_tour', '--id', 'evt_tour', '--update-time', '2026-11-30T10:00:00Z'];
    const applied = await webhook(args, openai);
    expect({ code: applied.code, output: applied.output }).toEqual({ code: 0, output: expect.stringMatching(/^200 .*"applied":true/) });
    expect(await (await ratchet.api('/operations/openai/batches/batch_tour')).json()).toMatchObject({
      kind: 'openai-batch',
      provider: 'openai',
      state: 'SUCCEEDED',
      providerState: 'batch.completed',
      updateTime: '2026-11-30T10:00:00.000000000Z',
      resultPending: true,
    });
    expect((await webhook(args, openai)).output).toContain('"reason":"duplicate"');
    // The job's Ratchet name, as the console shows it, names the same job.
    const byName = await webhook(['--provider', 'openai', 'fine_tuning.job.failed', 'openai/fine_tuning/jobs/ftjob_tour'], openai);
    expect(byName.output).toMatch(/^200 .*"applied":true.*"name":"openai\/fine_tuning\/jobs\/ftjob_tour"/);
    const azure = await webhook(['--provider', 'azure-openai', 'batch.cancelled', 'batch_az'], {
      AZURE_OPENAI_WEBHOOK_SECRET: azureSecret,
    });
    expect(azure.code).toBe(0);
    expect(await (await ratchet.api('/operations/azure-openai/tour/batches/batch_az')).json()).toMatchObject({
      provider: 'azure-openai',
      state: 'CANCELLED',
    });
    const refused = await webhook(['--provider', 'openai', 'batch.completed', 'batch_tour_2'], { OPENAI_WEBHOOK_SECRET: newSecret() });
    expect(refused.code).toBe(1);
    expect(refused.output).toContain(
      `ratchet webhook: ${ratchet.url}/webhooks/openai refused the signature: it was signed with OPENAI_WEBHOOK_SECRET`,
    );
  });

  it('npm run webhook --provider: a provider, a type or an option not its own, and no secret, are bad usage (exit 2), each in one line', async () => {
    const openai = { OPENAI_WEBHOOK_SECRET: openaiSecret };
    for (const [args, extra, why] of [
      [['--provider', 'gemeni', 'batch.succeeded', 'batches/1'], {}, 'unknown provider "gemeni": one of gemini, openai, azure-openai'],
      [
        ['--provider', 'openai', 'batch.succeeded', 'batch_1'],
        openai,
        'unknown event type "batch.succeeded" for openai: one of batch.completed',
      ],
      [['--provider', 'azure-openai', 'response.completed', 'resp_1'], {}, 'unknown event type "response.completed" for azure-openai'],
      [['batch.completed', 'batch_1'], {}, "(batch.completed is OpenAI's: --provider openai)"],
      [['--provider', 'openai', 'batch.completed', 'batch_1'], { OPENAI_WEBHOOK_SECRET: '' }, 'OPENAI_WEBHOOK_SECRET is not set'],
      [['--provider', 'openai', 'batch.completed', 'batch_1', '--timestamp', '2026-11-30T10:00:00Z'], openai, '--timestamp is Gemini'],
      [['--provider', 'openai', 'batch.completed', 'batch_1', '--update-time', 'yesterday'], openai, 'is not an RFC 3339 time'],
    ] as const) {
      const bad = await webhook([...args], extra);
      expect({ args, code: bad.code }).toEqual({ args, code: 2 });
      expect(bad.output.trim().split('\n')).toEqual([expect.stringContaining(why)]);
    }
    const help = await webhook(['--help']);
    expect(help.output).toContain('--provider <provider>');
    expect(help.output).toContain('fine_tuning.job.succeeded');
  });

  it('ratchet --version and -v say which Ratchet and which Node', async () => {
    for (const flag of ['--version', '-v']) {
      const { code, output } = await runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), flag], {
        PATH: process.env.PATH ?? '',
      });
      expect({ code, output: output.trim() }).toEqual({ code: 0, output: `ratchet 0.1.0 (node ${process.version})` });
    }
  });

  it('a port in use is one line, and nothing is left running', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const port = (blocker.address() as { port: number }).port;
    const dir = mkdtempSync(join(tmpdir(), 'ratchet-port-'));
    try {
      const { code, output } = await runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/start.ts')], {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        DATA_DIR: dir,
        PORT: String(port),
        POWERTOOLS_LOG_LEVEL: 'ERROR',
      });
      expect(code).toBe(1);
      expect(output.trim().split('\n')).toEqual([
        `ratchet: 127.0.0.1:${port} is in use; set PORT (and HOST) to another one, or PORT=0 for any free port`,
      ]);
    } finally {
      blocker.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('logs no idle reconcile run and no empty sampling_rate', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // several idle runs at 0.2 s
    const lines = ratchet
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'));
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.filter((line) => line.includes('"sampling_rate"'))).toEqual([]);
    expect(lines.filter((line) => line.includes('"message":"reconcile run"') && line.includes('"due":0'))).toEqual([]);
  });

  it('says, when the outbound sink first starts, how many backlog changes it delivers; not again after a restart', async () => {
    const receiver = await new Receiver(outbound).start();
    const withSink = () => ({
      ...env(),
      EFFECTS_WEBHOOK_URL: receiver.url,
      EFFECTS_SIGNING_SECRET: outbound,
      POWERTOOLS_LOG_LEVEL: 'WARN',
    });
    try {
      await ratchet.stop();
      ratchet = await startRatchet(withSink());
      const line = ratchet
        .output()
        .split('\n')
        .find((l) => l.includes('outbound sink: first start'));
      const backlog = Number(JSON.parse(line ?? '{}').backlog);
      expect(backlog).toBeGreaterThanOrEqual(2); // the state changes the earlier cases made
      await eventually(() => receiver.applied().length === backlog, 20_000, 'the backlog delivered');
      await ratchet.stop();
      ratchet = await startRatchet(withSink());
      expect(ratchet.output()).not.toContain('outbound sink: first start');
    } finally {
      await receiver.stop();
    }
  });

  it('says nothing of a backlog when a fresh folder starts with the sink on: there is none', async () => {
    const fresh = mkdtempSync(join(tmpdir(), 'ratchet-first-hour-fresh-'));
    const receiver = await new Receiver(outbound).start();
    const started = await startRatchet({
      ...env(),
      DATA_DIR: fresh,
      EFFECTS_WEBHOOK_URL: receiver.url,
      EFFECTS_SIGNING_SECRET: outbound,
    });
    try {
      // The sink's start is said before the ready line.
      expect(started.output()).not.toContain('first start');
    } finally {
      await started.stop();
      await receiver.stop();
      rmSync(fresh, { recursive: true, force: true });
    }
  });
});
