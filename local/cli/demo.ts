/**
 * `npm run demo`: the whole system on this machine with a fake Gemini and a
 * receiver, playing the story Ratchet exists for — a poll racing a webhook
 * while the receiver is down, a duplicate, the receiver back, a stale update
 * after the end — in a few plain lines, then kept running for the console
 * until Ctrl-C. It listens on a free port of its own (PORT, if set), so a
 * running `npm start` is no obstacle.
 */
// Set before anything logs or the SDK loads: the demo prints its own lines.
process.env.POWERTOOLS_LOG_LEVEL ??= 'ERROR';
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { parseCommandLine } from '../../app/command-line.ts';

parseCommandLine({
  name: 'ratchet demo',
  usage: `usage: [PORT=…] ratchet demo
  Runs Ratchet in memory with a fake Gemini and a receiver, on a free port of its own (or PORT), plays an
  out-of-order story in a few lines, and keeps running (the console's links are printed) until Ctrl-C.`,
  options: {},
});

const { loadConfig } = await import('../../app/config.ts');
const { FakeGemini } = await import('../fake-gemini.ts');
const { startLocalRuntime } = await import('../runtime.ts');
const { postSignedWebhook } = await import('./signed-webhook.ts');

const secret = () => `whsec_${randomBytes(24).toString('base64')}`;
const inbound = secret();
const outbound = secret();
const say = (line: string) => console.log(line);
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// The receiver: prints each effect as it lands; down on demand.
let receiverDown = false;
let refusals = 0;
const received: string[] = [];
const verifier = new Webhook(outbound);
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => {
    body += chunk;
  });
  req.on('end', () => {
    if (receiverDown) {
      refusals++;
      return void res.writeHead(503).end();
    }
    const { data } = verifier.verify(body, req.headers as Record<string, string>) as {
      data: { name: string; previousState: string | null; state: string; version: number };
    };
    const key = `${data.name}#${data.version}`;
    const again = received.includes(key);
    received.push(key);
    say(`  receiver: ${data.name} ${data.previousState ?? '∅'} → ${data.state} (v${data.version}, signed${again ? ', a redelivery' : ''})`);
    res.writeHead(200).end();
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));

const gemini = await new FakeGemini('demo-key').start();
const runtime = await startLocalRuntime(
  loadConfig({
    ...process.env,
    // A port of its own: `npm start` may well be running on 3000 (the README's tour has it so).
    PORT: process.env.PORT || '0',
    DATA_DIR: ':memory:',
    WEBHOOK_SIGNING_SECRETS: inbound,
    GEMINI_API_KEY: gemini.apiKey,
    GEMINI_BASE_URL: gemini.baseUrl,
    RECONCILE_INTERVAL_SECONDS: '1',
    EFFECTS_WEBHOOK_URL: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/effects`,
    EFFECTS_SIGNING_SECRET: outbound,
    EFFECTS_RETRY_BASE_MS: '500',
    EFFECTS_RETRY_MAX_MS: '1000',
  }),
).catch(async (error: NodeJS.ErrnoException) => {
  const message =
    error.code === 'EADDRINUSE' ? `port ${process.env.PORT} is in use; set PORT to another one, or leave it unset` : error.message;
  console.error(`ratchet demo: ${message}`);
  await gemini.stop();
  receiver.close();
  process.exit(1);
});
let stopping = false;
const stop = async (code: number) => {
  if (stopping) return;
  stopping = true;
  await runtime.stop();
  await gemini.stop();
  receiver.closeAllConnections();
  receiver.close();
  process.exit(code);
};
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));

async function webhook(type: string, id: string, time: string, webhookId = `msg_${randomBytes(6).toString('hex')}`) {
  const body = JSON.stringify({ type, version: 'v1', timestamp: time, data: { id, update_time: time } });
  const response = await postSignedWebhook(`${runtime.url}/webhooks/gemini`, inbound, webhookId, body);
  const answer = (await response.json()) as { applied: boolean; reason?: string };
  return answer.applied ? 'applied' : `not applied: ${answer.reason}`;
}
const authorization = { authorization: `Bearer ${runtime.apiToken}` };
const stateOf = async (name: string) =>
  (await (await fetch(`${runtime.url}/operations/${name}`, { headers: authorization })).json()) as {
    state: string | null;
    version: number;
  };
async function until(check: () => Promise<boolean> | boolean, what: string) {
  for (let waited = 0; !(await check()); waited += 100) {
    if (waited > 20_000) throw new Error(`demo: timed out waiting for ${what}`);
    await pause(100);
  }
}

try {
  say(`Ratchet ready at ${runtime.url} (demo: a fake Gemini at ${gemini.baseUrl} and a receiver; data: ${runtime.dataFile})`);
  say(`Console (this link signs you in, once): ${await runtime.loginLink()}`);

  const batch = 'batches/demo-race';
  say(`\n1. A poll and a webhook race on ${batch}, while the receiver is down.`);
  receiverDown = true;
  gemini.batches.set(batch, { state: 'BATCH_STATE_RUNNING', updateTime: '2026-11-30T10:00:00Z' });
  await fetch(`${runtime.url}/operations`, {
    method: 'POST',
    body: JSON.stringify({ name: batch }),
    headers: { 'content-type': 'application/json', ...authorization },
  });
  await until(async () => (await stateOf(batch)).state === 'RUNNING', 'the first poll');
  say('   reconcile polled it: RUNNING');
  gemini.holding.add(batch); // the next poll reads RUNNING and answers late
  await until(() => gemini.requests.filter((r) => r === batch).length >= 2, 'the slow poll');
  say(
    `   a poll is on its way (it read RUNNING); meanwhile the SUCCEEDED webhook: ${await webhook('batch.succeeded', batch, '2026-11-30T10:05:00Z', 'msg_race')}`,
  );
  gemini.release(batch);
  await pause(500); // the held poll answers RUNNING now; only then does Gemini's own state move
  gemini.batches.set(batch, { state: 'BATCH_STATE_SUCCEEDED', updateTime: '2026-11-30T10:05:00Z' });
  await pause(1_000);
  say(`   the slow poll landed after it: the state stays ${(await stateOf(batch)).state} (version ${(await stateOf(batch)).version})`);

  say('\n2. Gemini delivers the same webhook twice.');
  say(`   again: ${await webhook('batch.succeeded', batch, '2026-11-30T10:05:00Z', 'msg_race')}`);

  say('\n3. The receiver is back.');
  say(`   it answered ${refusals} attempts with 503 meanwhile; the changes it missed arrive now, once each, in order:`);
  receiverDown = false;
  await until(() => received.includes(`${batch}#3`), 'the effects after the outage');

  const interaction = 'interactions/demo-late';
  say(`\n4. A stale update arrives after the end, on ${interaction}.`);
  say(`   completed: ${await webhook('interaction.completed', interaction, '2026-11-30T10:10:00Z')}`);
  say(`   then an older "requires action": ${await webhook('interaction.requires_action', interaction, '2026-11-30T10:09:00Z')}`);
  await until(() => received.includes(`${interaction}#1`), 'the last effect');

  say(`\nDone: ${new Set(received).size} state changes, each delivered once, in order per operation.`);
  say(
    `The race in the console, every event with its reason and each effect's delivery (signs you in, once): ${await runtime.loginLink(`/console/operations/${batch}`)}`,
  );
  say(`Every job, once signed in: ${runtime.url}/ — Ctrl-C stops the demo.`);
} catch (error) {
  console.error((error as Error).message);
  await stop(1);
}
