/**
 * `npm run connect` end to end, as against a deployed stack: the CLI process
 * with the real AWS SDK clients against a moto of its own (CloudFormation,
 * Secrets Manager, DynamoDB) and the real @google/genai SDK (fake Gemini with
 * the webhooks API). "The deployed API" is the API Lambda handler itself,
 * served over HTTP, reading its signing secret from that Secrets Manager; the
 * fake Gemini delivers its ping there, signed, retrying non-2xx as Gemini does.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  ListSecretVersionIdsCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTableInput, type DynamoDbOperationStore, openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { SUBSCRIBED_EVENTS } from '../../providers/gemini/webhook.ts';
import { httpApiEvent } from '../support/api-gateway.ts';
import { MOTO_CREDENTIALS, MOTO_REGION, type Moto, publishStackOutputs, startMoto } from '../support/aws/moto.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const API_KEY = `AIza-test-${Date.now()}`;
const TABLE = `connect-test-${Date.now()}`;
let moto: Moto;
let secretsManager: SecretsManagerClient;
const gemini = new FakeGemini(API_KEY);
let api: Server;
let webhookUrl: string;
let receipts: DynamoDbOperationStore;
const arns: Record<string, string> = {};

/** A stack as `cdk deploy` leaves it: every secret `not-configured`. */
async function deployStack(name: string): Promise<Record<string, string>> {
  const secret = async (suffix: string) =>
    (await secretsManager.send(new CreateSecretCommand({ Name: `${name}-${suffix}`, SecretString: 'not-configured' }))).ARN as string;
  const outputs = {
    WebhookUrl: webhookUrl,
    WebhookSigningSecretArn: await secret('WebhookSigningSecrets'),
    GeminiApiKeySecretArn: await secret('GeminiApiKey'),
    EffectsWebhookUrlSecretArn: await secret('EffectsWebhookUrl'),
    EffectsSigningSecretArn: await secret('EffectsSigningSecret'),
    TableName: TABLE,
    ApiUrl: webhookUrl.replace(/\/webhooks\/gemini$/, ''),
  };
  await publishStackOutputs(moto.endpoint, name, outputs);
  return outputs;
}

beforeAll(async () => {
  // A moto of its own: the rotation test moves its Secrets Manager clock.
  moto = await startMoto();
  secretsManager = new SecretsManagerClient({ endpoint: moto.endpoint, region: MOTO_REGION, credentials: MOTO_CREDENTIALS });
  gemini.pingRetryForMs = 45_000;
  await gemini.start();
  const dynamodb = openDynamoDb({ endpoint: moto.endpoint, tables: { operations: operationsTable(TABLE) } });
  await ensureTable(dynamodb.client, createTableInput(TABLE));
  receipts = dynamodb.operations;

  api = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const result = (await handler(httpApiEvent(req.method ?? 'GET', req.url ?? '/', body, headers), context)) as {
      statusCode: number;
      headers?: Record<string, string>;
      body: string;
    };
    // Its headers as API Gateway passes them (a 503's Retry-After among them).
    res.writeHead(result.statusCode, { 'content-type': 'application/json', ...result.headers }).end(result.body);
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  webhookUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}/webhooks/gemini`;
  Object.assign(arns, await deployStack('Ratchet'));

  // The API function composes itself from its environment at cold start, as in Lambda.
  Object.assign(process.env, {
    TABLE_NAME: TABLE,
    DYNAMODB_ENDPOINT: moto.endpoint,
    WEBHOOK_SIGNING_SECRETS_ARN: arns.WebhookSigningSecretArn,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
  });
  ({ handler } = (await import('../../lambda/handlers/api.ts')) as never);
});

afterAll(async () => {
  await gemini.stop();
  secretsManager?.destroy();
  await moto?.stop();
  api?.closeAllConnections();
  await new Promise((resolve) => api?.close(resolve));
});

let handler: (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyResultV2>;
const context = { awsRequestId: 'req', functionName: 'api', getRemainingTimeInMillis: () => 10_000 } as Context;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function runConnect(args: string[], env: Record<string, string> = {}): Promise<Run> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'lib/cli/connect.ts', ...args], {
      cwd: PROJECT_ROOT,
      env: {
        PATH: process.env.PATH,
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
        AWS_CONFIG_FILE: '/dev/null',
        AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
        AWS_ENDPOINT_URL_CLOUDFORMATION: moto.endpoint,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: moto.endpoint,
        AWS_ENDPOINT_URL_DYNAMODB: moto.endpoint,
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        GEMINI_BASE_URL: gemini.baseUrl,
        GEMINI_API_KEY: API_KEY,
        ...env,
      },
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const secretOf = async (arn: string) => (await secretsManager.send(new GetSecretValueCommand({ SecretId: arn }))).SecretString;
/** How many versions Secrets Manager keeps of a secret: a run that changes nothing adds none. */
const versionsOf = async (arn: string) => (await secretsManager.send(new ListSecretVersionIdsCommand({ SecretId: arn }))).Versions?.length;
const storeSecret = (arn: string, value: string) => secretsManager.send(new PutSecretValueCommand({ SecretId: arn, SecretString: value }));
const hooksFor = (uri: string) => [...gemini.webhooks.values()].filter((w) => w.uri === uri);

async function deliver(secret: string) {
  const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: `batches/connect-${Math.random()}` }));
  return (await fetch(webhookUrl, { method: 'POST', body, headers })).status;
}

describe('npm run connect', () => {
  it('connects a fresh stack: creates the webhook, stores the secret Gemini shows once and the key, and sees the ping arrive', async () => {
    // Gemini (or anyone) knocking before setup is told to come back, and the API notes "not configured".
    expect(await deliver(newSecret())).toBe(503);

    const run = await runConnect(['--stack', 'Ratchet', '--wait', '45']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);

    const [hook, ...others] = hooksFor(webhookUrl);
    expect(others).toEqual([]);
    expect(hook?.subscribed_events.sort()).toEqual([...SUBSCRIBED_EVENTS].sort());
    expect(await secretOf(arns.WebhookSigningSecretArn as string)).toBe(hook?.secrets[0]?.secret);
    expect(await secretOf(arns.GeminiApiKeySecretArn as string)).toBe(API_KEY);
    // The ping reached the deployed API, was verified, and is in the table.
    expect(await receipts.lastUnmapped()).toMatchObject({ type: 'webhook.ping' });
    expect(gemini.pingAttempts.at(-1)).toEqual({ webhook: hook?.id, status: 200 });
    expect(run.stdout).toMatch(/created/);
    expect(run.stdout).toMatch(/ping: verified and recorded by Ratchet at .*: connected/);
    // Neither secret is ever printed.
    expect(run.stdout).not.toContain(API_KEY);
    expect(run.stdout).not.toContain(hook?.secrets[0]?.secret.slice(6, 20));
    // The webhook now works for real events.
    expect(await deliver(hook?.secrets[0]?.secret as string)).toBe(200);
  });

  it('changes nothing on a second run, and confirms the ping again', async () => {
    const before = [await versionsOf(arns.WebhookSigningSecretArn as string), await versionsOf(arns.GeminiApiKeySecretArn as string)];
    const received = (await receipts.lastUnmapped())?.received ?? 0;
    const run = await runConnect(['--stack', 'Ratchet']);
    expect(run.code).toBe(0);
    expect(hooksFor(webhookUrl)).toHaveLength(1);
    expect([await versionsOf(arns.WebhookSigningSecretArn as string), await versionsOf(arns.GeminiApiKeySecretArn as string)]).toEqual(
      before,
    );
    expect(run.stdout).toMatch(/API key: already stored/);
    expect(run.stdout).toMatch(/found, subscribed to every event/);
    expect((await receipts.lastUnmapped())?.received).toBe(received + 1);
  });

  it('--rotate keeps the previous secret accepted for the 24 h grace; a run after it drops the previous one', async () => {
    const [hook] = hooksFor(webhookUrl);
    const old = hook?.secrets[0]?.secret as string;
    // The version --rotate stores is dated 25 hours back, as if this were a day later.
    await moto.setSecretsManagerClock(-25 * 3_600);
    const run = await runConnect(['--stack', 'Ratchet', '--rotate']).finally(() => moto.setSecretsManagerClock(0));
    expect(run.code).toBe(0);
    const fresh = hook?.secrets[0]?.secret as string;
    expect(fresh).not.toBe(old);
    expect(await secretOf(arns.WebhookSigningSecretArn as string)).toBe(`${fresh} ${old}`);
    // The API may still hold the previous value for up to 5 minutes; the old secret is accepted all along.
    expect(await deliver(old)).toBe(200);

    // 25 hours later (the secret's version is that old), a plain run prunes the expired entry.
    const later = await runConnect(['--stack', 'Ratchet', '--wait', '45']);
    expect(later.code).toBe(0);
    expect(later.stdout).toMatch(/drop the previous one/);
    expect(await secretOf(arns.WebhookSigningSecretArn as string)).toBe(fresh);
  });

  it('re-enables a webhook Gemini disabled and subscribes it to what it lacks; a lost secret is replaced by rotation', async () => {
    const [hook] = hooksFor(webhookUrl);
    if (!hook) throw new Error('no webhook');
    hook.state = 'disabled_due_to_failed_deliveries';
    hook.subscribed_events = ['batch.succeeded'];
    await storeSecret(arns.WebhookSigningSecretArn as string, 'not-configured'); // lost: nobody holds the secret Gemini signs with
    const run = await runConnect(['--stack', 'Ratchet', '--wait', '45']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(hook.state).toBe('enabled');
    expect(hook.subscribed_events.sort()).toEqual([...SUBSCRIBED_EVENTS].sort());
    expect(hook.secrets).toHaveLength(1); // revoked at once: nobody held the old one
    expect(await secretOf(arns.WebhookSigningSecretArn as string)).toBe(hook.secrets[0]?.secret);
    expect(run.stdout).toMatch(/revoking the unknown one/);
  });

  it('--effects-url turns the outbound webhook on with a generated whsec_ secret that is never printed; off turns it off', async () => {
    const run = await runConnect(['--stack', 'Ratchet', '--effects-url', 'https://receiver.example/effects?token=t0k3n', '--wait', '45']);
    expect(run.code).toBe(0);
    expect(await secretOf(arns.EffectsWebhookUrlSecretArn as string)).toBe('https://receiver.example/effects?token=t0k3n');
    const generated = (await secretOf(arns.EffectsSigningSecretArn as string)) as string;
    expect(Buffer.from(generated.replace(/^whsec_/, ''), 'base64')).toHaveLength(32);
    expect(run.stdout).not.toContain(generated.slice(6));
    expect(run.stdout).not.toContain('t0k3n');
    expect(run.stdout).toContain(`--secret-id ${arns.EffectsSigningSecretArn}`);

    const again = await runConnect(['--stack', 'Ratchet']);
    expect(again.stdout).toMatch(/outbound webhook: on, signing secret stored/);
    expect(await secretOf(arns.EffectsSigningSecretArn as string)).toBe(generated);

    const off = await runConnect(['--stack', 'Ratchet', '--effects-url', 'off']);
    expect(off.code).toBe(0);
    expect(await secretOf(arns.EffectsWebhookUrlSecretArn as string)).toBe('not-configured');
  });

  it('--dry-run prints the plan and changes nothing', async () => {
    const outputs = await deployStack('Fresh');
    const arnsOf = Object.values(outputs).filter((v) => v.startsWith('arn:'));
    const versionsBefore = await Promise.all(arnsOf.map(versionsOf));
    const webhooks = gemini.webhooks.size;
    gemini.webhooks.clear(); // this stack's URL is the same fake API: start from an account without the webhook
    const run = await runConnect(['--stack', 'Fresh', '--dry-run', '--effects-url', 'https://receiver.example/e']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/Gemini webhook: would create it/);
    expect(run.stdout).toMatch(/API key: would store it/);
    expect(run.stdout).toMatch(/outbound webhook: would send effects/);
    expect(run.stdout).toMatch(/dry run: nothing was changed/);
    expect(gemini.webhooks.size).toBe(0);
    expect(await Promise.all(arnsOf.map(versionsOf))).toEqual(versionsBefore);
    for (const arn of arnsOf) expect(await secretOf(arn)).toBe('not-configured');
    expect(webhooks).toBe(1);
  });

  it('fails with one clear line: unknown stack, a key Gemini refuses, no key and no terminal, no --stack', async () => {
    const noStack = await runConnect(['--stack', 'Nope']);
    expect(noStack.code).toBe(1);
    expect(noStack.stderr.trim()).toMatch(/^ratchet-aws connect: cannot read stack Nope: Stack with id Nope does not exist$/);

    const badKey = await runConnect(['--stack', 'Ratchet'], { GEMINI_API_KEY: 'wrong' });
    expect(badKey.code).toBe(1);
    expect(badKey.stderr.trim()).toMatch(/^ratchet-aws connect: Gemini refused to list webhooks \(HTTP 401\): is GEMINI_API_KEY right\?$/);

    const noKey = await runConnect(['--stack', 'Ratchet'], { GEMINI_API_KEY: '' });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr.trim()).toBe('ratchet-aws connect: GEMINI_API_KEY is not set and there is no terminal to ask for it');

    const noArgs = await runConnect([]);
    expect(noArgs.stderr.trim()).toBe(
      'ratchet-aws connect: --stack NAME is required (usage: ratchet-aws connect --stack NAME [options]; see --help)',
    );
    const help = await runConnect(['--help']);
    expect(help.stdout).toMatch(/^usage: ratchet-aws connect --stack NAME/);
  });
});
