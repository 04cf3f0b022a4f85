/**
 * The one test with bundling on: synthesize the stack with the local esbuild,
 * then run the bundled API function (as Lambda would load it, CommonJS on
 * Node) against DynamoDB Local.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { RatchetStack } from '../../lib/ratchet-stack.ts';
import { httpApiEvent } from '../support/api-gateway.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';

// Outside the project, whose package.json says "type": "module": Lambda has no such file either.
const outdir = mkdtempSync(join(tmpdir(), 'ratchet-cdk-'));
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

const RUN_HANDLER = `
const { handler } = require(process.argv[1]);
const events = JSON.parse(process.argv[2]);
(async () => {
  const results = [];
  for (const event of events) results.push(await handler(event, { awsRequestId: 'r', getRemainingTimeInMillis: () => 9000 }));
  console.log(JSON.stringify(results));
})().catch((e) => { console.error(e); process.exit(1); });
`;

describe('bundled API function', () => {
  it('synthesizes with esbuild and serves a signed webhook from the bundle', async () => {
    const app = new App({ outdir });
    const stack = new RatchetStack(app, 'Ratchet', { env: { account: '123456789012', region: 'eu-west-1' } });
    expect(Object.keys(Template.fromStack(stack).findResources('AWS::Lambda::Function'))).toHaveLength(1);
    app.synth();
    const bundles = readdirSync(outdir)
      .filter((entry) => entry.startsWith('asset.'))
      .map((entry) => join(outdir, entry, 'index.js'))
      .filter((file) => existsSync(file));
    expect(bundles).toHaveLength(1);
    const bundle = bundles[0] as string;

    const secret = newSecret();
    const name = `batches/bundle-${Date.now()}`;
    const delivery = signedDelivery(secret, envelope('batch.expired', { id: name }));
    const events = [
      httpApiEvent('GET', '/healthz'),
      httpApiEvent('POST', '/webhooks/gemini', delivery.body, delivery.headers),
      httpApiEvent('GET', `/operations/${name}`),
    ];
    const { stdout } = await promisify(execFile)(process.execPath, ['-e', RUN_HANDLER, bundle, JSON.stringify(events)], {
      cwd: outdir,
      env: {
        PATH: process.env.PATH,
        TABLE_NAME: inject('tableName'),
        DYNAMODB_ENDPOINT: inject('dynamodbEndpoint'),
        WEBHOOK_SIGNING_SECRETS: secret,
        AWS_REGION: 'eu-west-1',
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        POWERTOOLS_METRICS_DISABLED: 'true',
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      },
    });
    const [health, webhook, read] = JSON.parse(stdout) as Array<{ statusCode: number; body: string }>;
    expect(health?.statusCode).toBe(200);
    expect({ status: webhook?.statusCode, body: JSON.parse(webhook?.body ?? '{}') }).toMatchObject({
      status: 200,
      body: { applied: true },
    });
    expect(JSON.parse(read?.body ?? '{}')).toMatchObject({ name, state: 'EXPIRED', version: 1 });
  });
});
