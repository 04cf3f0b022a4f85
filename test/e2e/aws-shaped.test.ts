/**
 * The AWS path end to end, as deployed, on moto (test/support/aws/stack-on-moto.ts):
 * the four bundles from `cdk synth` with the template's environment; signed
 * webhooks over HTTP into the API bundle (payload v2); the table's stream read
 * from moto and filtered by the template's Pipe pattern into moto's SQS FIFO
 * queue with the template's group and deduplication ids; the effects bundle fed
 * batches from that queue, honouring partial batch failures; the history bundle
 * on the stream; reconcile on a timer against the fake Gemini. Through a
 * receiver outage, every state change is delivered once, in version order,
 * and each webhook costs at most one DynamoDB request. The `/operations`
 * routes need SigV4, as the template's IAM authorization says; reads go
 * through `ratchet/client`, signed.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RatchetClient, sigV4Signer } from '../../sdk/client.ts';
import { MOTO_CREDENTIALS, MOTO_REGION } from '../support/aws/moto.ts';
import { FUNCTIONS, StackOnMoto } from '../support/aws/stack-on-moto.ts';
import { type Synthesized, synthesizeWithBundles } from '../support/aws/synth.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { type Delivery, eventually, Receiver } from '../support/receiver.ts';
import { shuffle } from '../support/shuffle.ts';

const inbound = newSecret();
const outbound = newSecret();
let synthesized: Synthesized;
let stack: StackOnMoto;
let receiver: Receiver;
let gemini: FakeGemini;
let client: RatchetClient;
/** The one caller IAM knows here (an application's role, say). */
const CALLER = { accessKeyId: 'AKIDRATCHETAPP', secretAccessKey: 'app-secret-key' };

beforeAll(async () => {
  synthesized = synthesizeWithBundles();
  receiver = await new Receiver(outbound).start();
  gemini = await new FakeGemini('aws-shaped-key').start();
  stack = await new StackOnMoto(synthesized, inject('dynamodbEndpoint'), {
    secrets: {
      WebhookSigningSecrets: inbound,
      EffectsWebhookUrl: receiver.url,
      EffectsSigningSecret: outbound,
      GeminiApiKey: 'aws-shaped-key',
    },
    env: {
      Effects: { EFFECTS_WEBHOOK_TIMEOUT_MS: '500', EFFECTS_RETRY_BASE_MS: '500', EFFECTS_RETRY_MAX_MS: '2000' },
      // File Search operations overdue after 2 s (the other kinds keep their hours), polled every second.
      Reconcile: { GEMINI_BASE_URL: gemini.baseUrl, OVERDUE_AFTER: 'file-search=2s', RECONCILE_INTERVAL_SECONDS: '1' },
      // The dispatcher hands the due jobs to the poll queue; the worker polls them.
      PollWorker: { GEMINI_BASE_URL: gemini.baseUrl, RECONCILE_INTERVAL_SECONDS: '1' },
    },
    reconcileEveryMs: 1_000,
    iamCallers: { [CALLER.accessKeyId]: CALLER.secretAccessKey },
  }).start();
  client = new RatchetClient({ url: stack.apiUrl, signer: sigV4Signer({ region: MOTO_REGION, credentials: CALLER }) });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
  await gemini?.stop();
  synthesized?.remove();
});

const post = (path: string, body: string, headers: Record<string, string>) =>
  fetch(`${stack.apiUrl}${path}`, { method: 'POST', body, headers });

describe('the AWS path as deployed, on moto', () => {
  it('delivers every state change once, in version order, through a receiver outage; history and reads agree; one DynamoDB request per webhook at most', {
    timeout: 150_000,
  }, async () => {
    const run = Date.now();
    const names = Array.from({ length: 8 }, (_, i) => `interactions/aws-${run}-${i}`);
    // Per operation: a first state, a newer report of it (a refresh: no effect), the end; each sent twice, all shuffled.
    const deliveries = names.flatMap((id) =>
      (
        [
          ['interaction.requires_action', '2026-11-30T10:00:01Z'],
          ['interaction.requires_action', '2026-11-30T10:00:02Z'],
          ['interaction.completed', '2026-11-30T10:00:03Z'],
        ] as const
      ).flatMap(([type, time]) => {
        const delivery = signedDelivery(inbound, envelope(type, { id }, time));
        return [delivery, delivery];
      }),
    );
    receiver.mode = 'fail';
    stack.proxy.reset();
    const statuses = [];
    for (const delivery of shuffle(deliveries, run))
      statuses.push((await post('/webhooks/gemini', delivery.body, delivery.headers)).status);
    expect(statuses.every((status) => status === 200)).toBe(true);
    const apiRequests = stack.proxy.calls.filter((call) => call.caller === 'Api' && call.action.startsWith('dynamodb:'));
    expect(apiRequests.length).toBeGreaterThan(0);
    expect(apiRequests.length).toBeLessThanOrEqual(deliveries.length);

    // A job tracked at creation whose webhook never comes: reconcile finds its end by polling.
    const polled = `batches/aws-polled-${run}`;
    gemini.batches.set(polled, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T11:00:00Z' });
    expect((await client.track(polled)).created).toBe(true);

    // Every operation's first effect was refused at least once: the outage went through the queue's backoff.
    await eventually(() => receiver.refused >= names.length, 30_000, 'refused attempts during the outage');
    receiver.mode = 'ok';
    const of = (name: string) => receiver.applied().filter((d: Delivery) => d.body.data.name === name);
    await eventually(
      () => [...names, polled].every((name) => of(name).at(-1)?.body.data.state === 'SUCCEEDED'),
      60_000,
      'every end delivered',
    );

    for (const name of [...names, polled]) {
      expect(await client.get(name)).toMatchObject({ name, state: 'SUCCEEDED' });
      // The effects are exactly the stored state changes (history, written from the stream), in version order, each once.
      const changes = async () => {
        return (await client.history(name)).filter((entry) => entry.stateChanged).map((entry) => [entry.version, entry.state]);
      };
      const effects = of(name).map((d) => [d.body.data.version, d.body.data.state]);
      await eventually(async () => JSON.stringify(await changes()) === JSON.stringify(effects), 20_000, `history of ${name}`);
      expect(effects.length).toBeGreaterThanOrEqual(1);
      expect(receiver.accepted.filter((d) => d.body.data.name === name).length).toBe(effects.length);
    }
    expect(stack.errors).toEqual([]);
    expect(stack.pollerErrors).toEqual([]);
    expect(Object.keys(stack.hosts)).toEqual([...FUNCTIONS]);
  });

  it('a File Search import tracked, polled, found overdue and ended: its overdue effect through the Pipe and the FIFO queue, between its state changes', {
    timeout: 90_000,
  }, async () => {
    const name = `fileSearchStores/aws-${Date.now()}/operations/import-1`;
    gemini.operations.set(name, { done: false });
    expect((await client.track(name)).operation).toMatchObject({ kind: 'file-search', state: null });
    const of = (job: string) => receiver.applied().filter((d: Delivery) => d.body.data.name === job);
    await eventually(() => of(name).some((d) => d.body.type === 'operation.overdue'), 45_000, 'the overdue effect');
    // The list is the history function's read model: it shows the mark once that function has had the write.
    const listed = async (filter: Parameters<typeof client.list>[0]) => (await client.list(filter)).operations.map((op) => op.name);
    await eventually(async () => (await listed({ overdue: true })).includes(name), 15_000, 'the overdue job listed');
    const response = { documentName: 'fileSearchStores/aws/documents/doc-1' };
    gemini.operations.set(name, { done: true, response });
    await eventually(() => of(name).some((d) => d.body.data.state === 'SUCCEEDED'), 45_000, 'the end');
    expect(of(name).map((d) => [d.body.type, d.body.data.version, d.body.data.state])).toEqual([
      ['operation.state_changed', 2, 'RUNNING'],
      ['operation.overdue', 3, 'RUNNING'],
      ['operation.state_changed', 4, 'SUCCEEDED'],
    ]);
    expect(await client.get(name)).toMatchObject({ state: 'SUCCEEDED', result: { response }, overdue: { afterSeconds: 2 } });
    expect((await client.history(name)).map((entry) => entry.source)).toEqual(['track', 'poll', 'overdue', 'poll']);
  });

  it('the client signs with SigV4 and waits for a job tracked at creation; a bad or missing signature is refused as API Gateway refuses it', async () => {
    const name = `batches/aws-client-${Date.now()}`;
    gemini.batches.set(name, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T12:05:00Z' });
    const { created, operation } = await client.track(name, { metadata: { order: 'A-17' } });
    expect({ created, state: operation.state, userMetadata: operation.userMetadata }).toEqual({
      created: true,
      state: null,
      userMetadata: { order: 'A-17' },
    });
    // Waiting from before the change: reconcile's next run polls the tracked job and finds its end.
    const seen: Array<string | null> = [];
    const done = await client.waitFor(name, { timeoutMs: 30_000, onChange: (op) => seen.push(op.state) });
    expect(done).toMatchObject({ name, state: 'SUCCEEDED', userMetadata: { order: 'A-17' } });
    expect(seen.at(-1)).toBe('SUCCEEDED');
    // The list is the history function's read model: it shows the end once that function has had the write.
    await eventually(
      async () => (await client.list({ kind: 'batch', state: 'SUCCEEDED' })).operations.some((op) => op.name === name),
      15_000,
      'the ended job listed',
    );

    const forger = new RatchetClient({
      url: stack.apiUrl,
      signer: sigV4Signer({ region: MOTO_REGION, credentials: { ...CALLER, secretAccessKey: 'not-the-secret' } }),
      retries: 0,
    });
    await expect(forger.get(name)).rejects.toMatchObject({ code: 'invalid-signature', status: 403 });
    await expect(forger.track(`batches/aws-forged-${Date.now()}`)).rejects.toMatchObject({ status: 403 });
    const unsigned = new RatchetClient({ url: stack.apiUrl, signer: 'none', retries: 0 });
    await expect(unsigned.get(name)).rejects.toMatchObject({ code: 'invalid-signature', status: 403 });
    // A signed request replayed with another body is refused too.
    const signed = await sigV4Signer({ region: MOTO_REGION, credentials: CALLER })({
      method: 'POST',
      url: new URL(`${stack.apiUrl}/operations`),
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'batches/aws-one' }),
    });
    const replayed = await post('/operations', JSON.stringify({ name: 'batches/aws-other' }), {
      'content-type': 'application/json',
      ...signed,
    });
    expect(replayed.status).toBe(403);
    // The webhook route is not IAM's: its signature is the function's business.
    expect((await post('/webhooks/gemini', '{}', { 'content-type': 'application/json' })).status).toBe(401);
  });

  it('takes a rotated signing secret from Secrets Manager without a deploy: the new one at once, the old one through the grace', async () => {
    const signed = (secret: string) => {
      const delivery = signedDelivery(secret, envelope('batch.succeeded', { id: `batches/aws-rotated-${Math.random()}` }));
      return post('/webhooks/gemini', delivery.body, delivery.headers);
    };
    expect((await signed(inbound)).status).toBe(200); // the value is cached (5 minutes)
    const next = newSecret();
    // As `npm run connect -- --rotate` stores it: the new secret first, the previous one kept for 24 hours.
    await stack.world.putSecret('WebhookSigningSecrets', `${next} ${inbound}`);
    stack.proxy.reset();
    // Nothing cached matches the new signature: the API reads the secret past its cache.
    expect((await signed(next)).status).toBe(200);
    expect((await signed(inbound)).status).toBe(200);
    expect((await signed(next)).status).toBe(200);
    // A signature no secret matches is refused, and is no reason to read the secret again (at most every 30 s).
    expect((await signed(newSecret())).status).toBe(401);
    const reads = stack.proxy.calls.filter((call) => call.caller === 'Api' && call.action === 'secretsmanager:GetSecretValue');
    expect(reads).toHaveLength(1);
  });

  it('npm run aws -- redrive --stack lists a dead-lettered effect from the deployed tables and delivers it again, once', async () => {
    const stackName = `RatchetOnMoto${Date.now()}`;
    await stack.publishOutputs(stackName);
    const name = `batches/aws-gone-${Date.now()}`;
    receiver.refuseOnly = (n) => n === name;
    receiver.mode = 'gone'; // 410: dead-lettered at once
    const delivery = signedDelivery(inbound, envelope('batch.succeeded', { id: name }));
    expect((await post('/webhooks/gemini', delivery.body, delivery.headers)).status).toBe(200);
    await eventually(async () => (await redrive(stackName, '--list')).stdout.includes(`${name}#1`), 30_000, 'the dead letter');
    expect(receiver.applied().filter((d) => d.body.data.name === name)).toEqual([]);

    receiver.mode = 'ok';
    const run = await redrive(stackName);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toContain(`re-queued ${name}#1`);
    await eventually(() => receiver.applied().some((d) => d.body.data.name === name), 30_000, 'the redriven effect');
    // Delivered once, and its dead letter gone (the effects function removes it after the redriven delivery).
    await eventually(async () => !(await redrive(stackName, '--list')).stdout.includes(name), 30_000, 'the dead letter removed');
    expect(receiver.accepted.filter((d) => d.body.data.name === name)).toHaveLength(1);
    receiver.refuseOnly = undefined;
  });
});

/** `ratchet-aws redrive --stack NAME …` (npm run aws -- redrive …) as an operator runs it, against moto's CloudFormation, DynamoDB and SQS. */
async function redrive(stackName: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'lib/cli/ratchet-aws.ts', 'redrive', '--stack', stackName, ...args],
      {
        cwd: PROJECT_ROOT,
        env: {
          PATH: process.env.PATH,
          AWS_REGION: MOTO_REGION,
          AWS_ACCESS_KEY_ID: MOTO_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: MOTO_CREDENTIALS.secretAccessKey,
          AWS_CONFIG_FILE: '/dev/null',
          AWS_SHARED_CREDENTIALS_FILE: '/dev/null',
          AWS_ENDPOINT_URL: inject('dynamodbEndpoint'),
          AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        },
      },
    );
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
