/**
 * Every integration and e2e test file: each JSON answer a test receives from
 * Ratchet through `fetch` (the tests' own requests and the TypeScript
 * client's) is held to the OpenAPI description, and a test that received one
 * the description does not allow fails, naming it (openapi-answers.ts).
 */
import { afterEach } from 'vitest';
import { violationOf } from './openapi-answers.ts';

const pending: Promise<void>[] = [];
const violations: string[] = [];
const realFetch = globalThis.fetch;

globalThis.fetch = async function checkedFetch(input: Parameters<typeof fetch>[0], init?: RequestInit): Promise<Response> {
  // Read without constructing a Request: that would take the body of one passed in.
  const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
  const url = input instanceof Request ? input.url : String(input);
  const response = await realFetch(input, init);
  if (/^application\/json/i.test(response.headers.get('content-type') ?? '')) {
    const copy = response.clone();
    pending.push(
      copy.text().then(
        (text) => {
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = text;
          }
          const violation = violationOf(method, response.url || url, response.status, body);
          if (violation) violations.push(violation);
        },
        () => undefined, // the reader went away (aborted): nothing whole to judge
      ),
    );
  }
  return response;
};

afterEach(async () => {
  await Promise.all(pending.splice(0));
  const found = violations.splice(0);
  if (found.length > 0) throw new Error(`answers the OpenAPI description does not allow:\n${found.join('\n')}`);
});
