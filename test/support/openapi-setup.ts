/**
 * Every integration and e2e test file: each answer a test receives from
 * Ratchet is held to the OpenAPI description (openapi-answers.ts), and a test
 * that received one the description does not allow fails, naming it. Both
 * ways an answer reaches a test are wrapped here, so no test has to remember:
 * the global `fetch` (the tests' own requests over HTTP and the TypeScript
 * client's), and the `fetch` of every `createRatchet` (inside an app, in
 * process, where no socket is crossed).
 */
import { afterEach, vi } from 'vitest';
import { violationOfAnswer } from './openapi-answers.ts';

const judging: Promise<string | undefined>[] = [];

/**
 * `fetch` with each answer judged (after it is handed on: the body is read from a copy); with `server`, only those
 * to requests under it (a mounted Ratchet's 404 outside its basePath is the app's, which the description is not).
 */
function held(fetch: typeof globalThis.fetch, server = ''): typeof globalThis.fetch {
  return async function heldFetch(input: Parameters<typeof globalThis.fetch>[0], init?: RequestInit): Promise<Response> {
    // Read without constructing a Request: that would take the body of one passed in.
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
    const url = input instanceof Request ? input.url : String(input);
    const response = await fetch(input, init);
    const { pathname } = new URL(url);
    if (pathname === server || pathname.startsWith(`${server}/`)) judging.push(violationOfAnswer(method, url, response));
    return response;
  };
}

globalThis.fetch = held(globalThis.fetch);

// Whichever test file imports createRatchet gets this one: its instances answer through a held fetch (the client in
// process included, which goes through the instance's fetch).
vi.mock(import('../../local/library.ts'), async (importOriginal) => {
  const library = await importOriginal();
  return {
    ...library,
    createRatchet(...args: Parameters<typeof library.createRatchet>) {
      const ratchet = library.createRatchet(...args);
      ratchet.fetch = held(ratchet.fetch as typeof globalThis.fetch, args[0]?.basePath?.replace(/\/+$/, ''));
      return ratchet;
    },
  };
});

afterEach(async () => {
  const found = (await Promise.all(judging.splice(0))).filter((violation) => violation !== undefined);
  if (found.length > 0) throw new Error(`answers the OpenAPI description does not allow:\n${found.join('\n')}`);
});
