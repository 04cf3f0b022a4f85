/**
 * `npm run connect` end to end, as against a deployed stack: the CLI process
 * with the real AWS SDK clients (CloudFormation and Secrets Manager faked on
 * 127.0.0.1, moto) and the real @google/genai SDK (fake Gemini with
 * the webhooks API). "The deployed API" is the API Lambda handler itself,
 * served over HTTP, reading its signing secret from that Secrets Manager; the
 * fake Gemini delivers its ping there, signed, retrying non-2xx as Gemini does.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SUBSCRIBED_EVENTS } from '../../lambda/core/gemini-webhook.ts';
import { createDocumentClient, createDynamoDbClient } from '../../lambda/store/dynamodb.ts';
import { DynamoDbOperationStore } from '../../lambda/store/dynamodb-operation-store.ts';
import { createTableInput } from '../../lambda/store/table.ts';
import { httpApiEvent } from '../support/api-gateway.ts';
import { ensureTable } from '../support/aws/tables.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeAws } from '../support/fake-aws.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const API_KEY = `AIza-test-${Date.now()}`;
const TABLE = `connect-test-${Date.now()}`;
const aws = new FakeAws();
const gemini = new FakeGemini(API_KEY);
let api: Server;
let webhookUrl: string;
let receipts: DynamoDbOperationStore;
const arns: Record<string, string> = {};

/** A stack as `cdk deploy` leaves it: every secret `not-configured`. */
function deployStack(name: string): Record<string, string> {
  const outputs = {
    WebhookUrl: webhookUrl,
    WebhookSigningSecretArn: aws.createSecret(`${name}-WebhookSigningSecrets`, 'not-configured'),
    GeminiApiKeySecretArn: aws.createSecret(`${name}-GeminiApiKey`, 'not-configured'),
    EffectsWebhookUrlSecretArn: aws.createSecret(`${name}-EffectsWebhookUrl`, 'not-configured'),
    EffectsSigningSecretArn: aws.createSecret(`${name}-EffectsSigningSecret`, 'not-configured'),
    TableName: TABLE,
    ApiUrl: webhookUrl.replace(/\/webhooks\/gemini$/, ''),
  };
  aws.stacks.set(name, outputs);
  return outputs;
}

beforeAll(async () => {
  await aws.start();
  gemini.pingRetryForMs = 45_000;
  await gemini.start();
  const dynamodb = createDynamoDbClient({ endpoint: inject('dynamodbEndpoint') });
  await ensureTable(dynamodb, createTableInput(TABLE));
  receipts = new DynamoDbOperationStore(createDocumentClient(dynamodb), TABLE);

  api = createServer(async (req, res) => {
    let body = '';
    for await (const chunk of req) body += chunk;
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const result = (await handler(httpApiEvent(req.method ?? 'GET', req.url ?? '/', body, headers), context)) as {
      statusCode: number;
      body: string;
    };
    res.writeHead(result.statusCode, { 'content-type': 'application/json' }).end(result.body);
  });
  await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
  webhookUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}/webhooks/gemini`;
  Object.assign(arns, deployStack('Ratchet'));

  // The API function composes itself from its environment at cold start, as in Lambda.
  Object.assign(process.env, {
    TABLE_NAME: TABLE,
    DYNAMODB_ENDPOINT: inject('dynamodbEndpoint'),
    WEBHOOK_SIGNING_SECRETS_ARN: arns.WebhookSigningSecretArn,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: aws.endpoint,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
  });
  ({ handler } = (await import('../../lambda/handlers/api.ts')) as never);
});

afterAll(async () => {
  await gemini.stop();
  await aws.stop();
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
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'local/cli/connect.ts', ...args], {
      cwd: PROJECT_ROOT,
      env: {
        PATH: process.env.PATH,
        AWS_REGION: 'us-east-1',
        AWS_ACCESS_KEY_ID: 'test',
        AWS_SECRET_ACCESS_KEY: 'test',
        AWS_CONFIG_FILE: '/dev/null',
        AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
        AWS_ENDPOINT_URL_CLOUDFORMATION: aws.endpoint,
        AWS_ENDPOINT_URL_SECRETS_MANAGER: aws.endpoint,
        AWS_ENDPOINT_URL_DYNAMODB: inject('dynamodbEndpoint'),
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

const secretOf = (arn: string) => aws.current(arn)?.value;
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
    expect(secretOf(arns.WebhookSigningSecretArn as string)).toBe(hook?.secrets[0]?.secret);
    expect(secretOf(arns.GeminiApiKeySecretArn as string)).toBe(API_KEY);
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
    const versions = (arn: string) => aws.secrets.get(arn)?.length;
    const before = [versions(arns.WebhookSigningSecretArn as string), versions(arns.GeminiApiKeySecretArn as string)];
    const received = (await receipts.lastUnmapped())?.received ?? 0;
    const run = await runConnect(['--stack', 'Ratchet']);
    expect(run.code).toBe(0);
    expect(hooksFor(webhookUrl)).toHaveLength(1);
    expect([versions(arns.WebhookSigningSecretArn as string), versions(arns.GeminiApiKeySecretArn as string)]).toEqual(before);
    expect(run.stdout).toMatch(/API key: already stored/);
    expect(run.stdout).toMatch(/found, subscribed to every event/);
    expect((await receipts.lastUnmapped())?.received).toBe(received + 1);
  });

  it('--rotate keeps the previous secret accepted for the 24 h grace; a run after it drops the previous one', async () => {
    const [hook] = hooksFor(webhookUrl);
    const old = hook?.secrets[0]?.secret as string;
    const run = await runConnect(['--stack', 'Ratchet', '--rotate']);
    expect(run.code).toBe(0);
    const fresh = hook?.secrets[0]?.secret as string;
    expect(fresh).not.toBe(old);
    expect(secretOf(arns.WebhookSigningSecretArn as string)).toBe(`${fresh} ${old}`);
    // The API may still hold the previous value for up to 5 minutes; the old secret is accepted all along.
    expect(await deliver(old)).toBe(200);

    // 25 hours later (the secret's version is that old), a plain run prunes the expired entry.
    const current = aws.current(arns.WebhookSigningSecretArn as string);
    if (current) current.createdAt = new Date(Date.now() - 25 * 3_600_000);
    const later = await runConnect(['--stack', 'Ratchet', '--wait', '45']);
    expect(later.code).toBe(0);
    expect(later.stdout).toMatch(/drop the previous one/);
    expect(secretOf(arns.WebhookSigningSecretArn as string)).toBe(fresh);
  });

  it('re-enables a webhook Gemini disabled and subscribes it to what it lacks; a lost secret is replaced by rotation', async () => {
    const [hook] = hooksFor(webhookUrl);
    if (!hook) throw new Error('no webhook');
    hook.state = 'disabled_due_to_failed_deliveries';
    hook.subscribed_events = ['batch.succeeded'];
    const stored = aws.current(arns.WebhookSigningSecretArn as string);
    if (stored) stored.value = 'not-configured'; // lost: nobody holds the secret Gemini signs with
    const run = await runConnect(['--stack', 'Ratchet', '--wait', '45']);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(hook.state).toBe('enabled');
    expect(hook.subscribed_events.sort()).toEqual([...SUBSCRIBED_EVENTS].sort());
    expect(hook.secrets).toHaveLength(1); // revoked at once: nobody held the old one
    expect(secretOf(arns.WebhookSigningSecretArn as string)).toBe(hook.secrets[0]?.secret);
    expect(run.stdout).toMatch(/revoking the unknown one/);
  });

  it('--effects-url turns the outbound webhook on with a generated whsec_ secret that is never printed; off turns it off', async () => {
    const run = await runConnect(['--stack', 'Ratchet', '--effects-url', 'https://receiver.example/effects?token=t0k3n', '--wait', '45']);
    expect(run.code).toBe(0);
    expect(secretOf(arns.EffectsWebhookUrlSecretArn as string)).toBe('https://receiver.example/effects?token=t0k3n');
    const generated = secretOf(arns.EffectsSigningSecretArn as string) as string;
    expect(Buffer.from(generated.replace(/^whsec_/, ''), 'base64')).toHaveLength(32);
    expect(run.stdout).not.toContain(generated.slice(6));
    expect(run.stdout).not.toContain('t0k3n');
    expect(run.stdout).toContain(`--secret-id ${arns.EffectsSigningSecretArn}`);

    const again = await runConnect(['--stack', 'Ratchet']);
    expect(again.stdout).toMatch(/outbound webhook: on, signing secret stored/);
    expect(secretOf(arns.EffectsSigningSecretArn as string)).toBe(generated);

    const off = await runConnect(['--stack', 'Ratchet', '--effects-url', 'off']);
    expect(off.code).toBe(0);
    expect(secretOf(arns.EffectsWebhookUrlSecretArn as string)).toBe('not-configured');
  });

  it('--dry-run prints the plan and changes nothing', async () => {
    const outputs = deployStack('Fresh');
    const webhooks = gemini.webhooks.size;
    gemini.webhooks.clear(); // this stack's URL is the same fake API: start from an account without the webhook
    const calls = aws.calls.length;
    const run = await runConnect(['--stack', 'Fresh', '--dry-run', '--effects-url', 'https://receiver.example/e']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/Gemini webhook: would create it/);
    expect(run.stdout).toMatch(/API key: would store it/);
    expect(run.stdout).toMatch(/outbound webhook: would send effects/);
    expect(run.stdout).toMatch(/dry run: nothing was changed/);
    expect(gemini.webhooks.size).toBe(0);
    expect(aws.calls.slice(calls).filter((c) => c !== 'SecretsManager.GetSecretValue' && c !== 'CloudFormation.DescribeStacks')).toEqual(
      [],
    );
    for (const arn of Object.values(outputs).filter((v) => v.startsWith('arn:'))) expect(secretOf(arn)).toBe('not-configured');
    expect(webhooks).toBe(1);
  });

  it('fails with one clear line: unknown stack, a key Gemini refuses, no key and no terminal, no --stack', async () => {
    const noStack = await runConnect(['--stack', 'Nope']);
    expect(noStack.code).toBe(1);
    expect(noStack.stderr.trim()).toMatch(/^connect: cannot read stack Nope: Stack with id Nope does not exist$/);

    const badKey = await runConnect(['--stack', 'Ratchet'], { GEMINI_API_KEY: 'wrong' });
    expect(badKey.code).toBe(1);
    expect(badKey.stderr.trim()).toMatch(/^connect: Gemini refused to list webhooks \(HTTP 401\): is GEMINI_API_KEY right\?$/);

    const noKey = await runConnect(['--stack', 'Ratchet'], { GEMINI_API_KEY: '' });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr.trim()).toBe('connect: GEMINI_API_KEY is not set and there is no terminal to ask for it');

    const noArgs = await runConnect([]);
    expect(noArgs.stderr.trim()).toBe('connect: --stack NAME is required (see --help)');
    const help = await runConnect(['--help']);
    expect(help.stdout).toMatch(/^usage: npm run connect -- --stack NAME/);
  });
});
