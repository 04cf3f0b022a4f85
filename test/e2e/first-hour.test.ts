/**
 * The first hour's friction, each fixed and held here through `npm start` and
 * `npm run webhook` as processes: the development secret survives a restart,
 * the webhook CLI says what happened (exit code, one line when Ratchet is not
 * there, --id, --update-time, --data), a port in use is one line with nothing
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
