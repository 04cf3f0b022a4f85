/**
 * One serverless invocation's worth of Ratchet, in a process of its own
 * (test/e2e/library-serverless.test.ts): a signed webhook through `fetch`, then a
 * `tick`, then nothing: no `close()`. Whatever Ratchet left running (a timer, a
 * connection in use, a LISTEN) would keep this process from ending.
 * Usage: DATABASE_URL=… DATABASE_SCHEMA=… WEBHOOK_SIGNING_SECRETS=… DELIVERY='{"headers":…,"body":…}' tsx library-once.ts
 */
import { createRatchet } from '../../local/library.ts';
import { violationOfAnswer } from './openapi-answers.ts';

const delivery = JSON.parse(process.env.DELIVERY as string) as { headers: Record<string, string>; body: string };
const ratchet = createRatchet({ onChange: () => {} });
const request = new Request('http://127.0.0.1/webhooks/gemini', { method: 'POST', ...delivery });
const answer = await ratchet.fetch(request);
// No test's setup file runs here: the answer is held to the description by hand, and what it found printed.
const violation = await violationOfAnswer(request.method, request.url, answer);
const tick = await ratchet.tick({ budgetMs: 2_000 });
console.log(JSON.stringify({ status: answer.status, effects: tick.effects, ...(violation && { violation }) }));
