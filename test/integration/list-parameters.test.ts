/**
 * A bad parameter of the lists (`GET /operations`, `GET /decisions`) is a 400
 * that names it in `field`, with a sentence about that parameter alone, as
 * the change feed and the long poll answer: a client can point at what to
 * change. An empty `cursor=` and one the store never handed out included.
 * Against a real Ratchet (in memory, inside this process).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createRatchet } from '../../local/library.ts';
import { newSecret } from '../support/deliveries.ts';

const TOKEN = 'list-parameters-token-0123456789abcdef';
const ratchet = createRatchet({
  dataDir: ':memory:',
  webhookSigningSecrets: newSecret(),
  apiToken: TOKEN,
  env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL' },
});
afterAll(() => ratchet.close());

async function ask(path: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const answer = await ratchet.fetch(new Request(`http://127.0.0.1${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }));
  return { status: answer.status, body: (await answer.json()) as Record<string, unknown> };
}

describe('a list refuses a bad parameter by its name', () => {
  it.each([
    ['/operations?state=DONE', 'state', /^state must be one of PENDING, /],
    ['/operations?kind=job', 'kind', /^kind must be one of batch, /],
    ['/operations?effects=sometimes', 'effects', /^effects must be one of retrying, dead-lettered/],
    ['/operations?overdue=yes', 'overdue', /^overdue must be true or false$/],
    ['/operations?limit=0', 'limit', /^limit must be a whole number from 1 to 100$/],
    ['/operations?limit=many', 'limit', /^limit must be a whole number from 1 to 100$/],
    ['/operations?state=SUCCEEDED&limit=101', 'limit', /^limit must be/],
    ['/operations?cursor=', 'cursor', /^cursor must be/],
    ['/operations?cursor=not-a-cursor', 'cursor', /^cursor /],
    ['/decisions?outcome=applied', 'outcome', /^outcome must be unprocessable/],
    ['/decisions?limit=1000', 'limit', /^limit must be a whole number from 1 to 100$/],
    ['/decisions?cursor=', 'cursor', /^cursor must be/],
    ['/decisions?cursor=not-a-cursor', 'cursor', /^cursor /],
  ])('GET %s: 400 naming %s', async (path, field, message) => {
    const { status, body } = await ask(path);
    expect(status).toBe(400);
    expect(body).toMatchObject({ error: 'malformed-request', field });
    expect(body.message).toMatch(message);
  });

  it('takes good parameters, and ignores none of the bad ones for a good one beside it', async () => {
    expect((await ask('/operations?state=SUCCEEDED&kind=batch&overdue=false&limit=5')).status).toBe(200);
    expect((await ask('/decisions?outcome=unprocessable&limit=5')).status).toBe(200);
    expect((await ask('/operations?state=SUCCEEDED&kind=job')).body).toMatchObject({ field: 'kind' });
  });
});
