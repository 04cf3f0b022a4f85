/**
 * An application using Ratchet: it creates a Gemini batch with the job
 * tracked at creation (`trackJobs`), waits for its outcome (`waitFor`), and
 * receives the signed effect Ratchet sends for it (`verifyEffect`).
 *
 *   RATCHET_URL=http://127.0.0.1:3000 RATCHET_API_TOKEN=$(cat .ratchet-data/api-token) \
 *     GEMINI_API_KEY=… EFFECTS_SIGNING_SECRET=whsec_… node --import tsx examples/app/index.ts
 *
 * Ratchet must send its effects here: start it with
 * EFFECTS_WEBHOOK_URL=http://127.0.0.1:4000/effects (RECEIVER_PORT) and the
 * same EFFECTS_SIGNING_SECRET. GEMINI_BASE_URL points the SDK elsewhere (the
 * fake Gemini of `npm run demo` and the tests).
 */
import { createServer } from 'node:http';
import { GoogleGenAI } from '@google/genai';
import { RatchetClient } from '@ratchet/client';
import { type StateChangedEvent, verifyEffect } from '@ratchet/client/receiver';
import { trackJobs } from '@ratchet/genai';

const USAGE =
  'usage: RATCHET_URL=… RATCHET_API_TOKEN=… GEMINI_API_KEY=… EFFECTS_SIGNING_SECRET=whsec_… node --import tsx examples/app/index.ts';
if (process.argv.includes('--help')) {
  console.log(USAGE);
  process.exit(0);
}
const { GEMINI_API_KEY, GEMINI_BASE_URL, EFFECTS_SIGNING_SECRET } = process.env;
if (!GEMINI_API_KEY || !EFFECTS_SIGNING_SECRET || process.argv.length > 2) {
  console.error(USAGE);
  process.exit(2);
}
const ratchetUrl = process.env.RATCHET_URL ?? 'http://127.0.0.1:3000';
const receiverPort = Number(process.env.RECEIVER_PORT ?? 4000);

// 1. Receive Ratchet's effects: verify each, act once per event id.
const received: StateChangedEvent[] = [];
const receiver = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  try {
    const event = verifyEffect(req.headers, body, EFFECTS_SIGNING_SECRET);
    if (!received.some((e) => e.id === event.id)) received.push(event);
    res.writeHead(204).end();
  } catch (error) {
    console.error(`refused a delivery: ${(error as Error).message}`);
    res.writeHead(400).end();
  }
});
await new Promise<void>((resolve) => receiver.listen(receiverPort, '127.0.0.1', resolve));

// 2. Create a batch; trackJobs tells Ratchet before create returns.
const ratchet = new RatchetClient({ url: ratchetUrl });
const ai = trackJobs(
  new GoogleGenAI({ apiKey: GEMINI_API_KEY, ...(GEMINI_BASE_URL && { httpOptions: { baseUrl: GEMINI_BASE_URL } }) }),
  ratchet,
);
const job = await ai.batches.create({
  model: process.env.MODEL ?? 'gemini-2.5-flash',
  src: { inlinedRequests: [{ contents: [{ role: 'user', parts: [{ text: 'Name three lighthouses.' }] }] }] },
  config: { displayName: 'ratchet-example', webhookConfig: { userMetadata: { example: 'app' } } },
});
const name = job.name as string;
console.log(`created ${name}, tracked by Ratchet`);

// 3. Wait for its outcome; a change that happened before this call is not missed.
const done = await ratchet.waitFor(name, {
  until: 'terminal',
  timeoutMs: Number(process.env.WAIT_TIMEOUT_MS ?? 48 * 3_600_000),
  onChange: (operation) => console.log(`${name} is ${operation.state ?? 'tracked, not yet observed'}`),
});
console.log(`${name} ended ${done.state}`);

// 4. Its effect: the same change, signed, delivered once.
const deadline = Date.now() + 60_000;
while (!received.some((e) => e.data.name === name && e.data.state === done.state) && Date.now() < deadline) {
  await new Promise((resolve) => setTimeout(resolve, 200));
}
const effect = received.find((e) => e.data.name === name && e.data.state === done.state);
console.log(
  effect
    ? `effect received: ${effect.id} ${effect.data.previousState ?? '-'} -> ${effect.data.state}`
    : 'no effect received within a minute',
);
receiver.close();
process.exit(effect ? 0 : 1);
