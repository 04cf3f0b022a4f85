/**
 * Dynamic-webhook signatures: `v1a` Ed25519 and RS256 JWTs against a key set
 * served over real HTTP on 127.0.0.1, every forgery refused, the key set's
 * caching and its failures.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookKeySet } from '../../app/http/webhook-keys.ts';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import {
  ed25519Delivery,
  ed25519Key,
  GOOGLE_ISSUER,
  jwtDelivery,
  KeyServer,
  publicKeyAsSecret,
  rsaKey,
  unsignedJwtDelivery,
} from '../support/google-keys.ts';

const AUDIENCE = 'https://ratchet.example/webhooks/gemini';
const ed = ed25519Key();
const rsa = rsaKey();
const server = new KeyServer(ed, rsa);
const payload = envelope('batch.succeeded', { id: 'batches/dyn-1' });

beforeAll(async () => {
  await server.start();
});
afterAll(async () => {
  await server.stop();
});

const verifier = (options: { audience?: string; secrets?: string[]; keys?: WebhookKeySet } = {}) =>
  new WebhookSignatureVerifier(async () => options.secrets ?? [], {
    keys: options.keys ?? new WebhookKeySet(server.url),
    audience: 'audience' in options ? options.audience : AUDIENCE,
    issuer: GOOGLE_ISSUER,
  });
const verify = (v: WebhookSignatureVerifier, d: { body: string; headers: Record<string, string> }) =>
  v.verify(d.body, new Headers(d.headers));

describe('v1a (Ed25519) signatures', () => {
  it('accepts a delivery signed with a published key, and says it was Ed25519', async () => {
    const delivery = ed25519Delivery(ed, payload, { id: 'msg_ed' });
    expect(await verify(verifier(), delivery)).toEqual({ ok: true, id: 'msg_ed', scheme: 'ed25519' });
  });

  it('refuses an unknown key, a tampered body, another id and a stale timestamp', async () => {
    const v = verifier();
    expect(await verify(v, ed25519Delivery(ed25519Key(), payload))).toMatchObject({ ok: false, reason: 'no matching v1a signature' });
    const delivery = ed25519Delivery(ed, payload);
    expect(await verify(v, { ...delivery, body: delivery.body.replace('dyn-1', 'dyn-2') })).toMatchObject({ ok: false });
    expect(await verify(v, { ...delivery, headers: { ...delivery.headers, 'webhook-id': 'msg_other' } })).toMatchObject({ ok: false });
    const stale = ed25519Delivery(ed, payload, { timestamp: Math.floor(Date.now() / 1000) - 301 });
    expect(await verify(v, stale)).toEqual({ ok: false, reason: 'webhook-timestamp outside the ±300 s tolerance' });
  });

  it('does not take an RSA key or a private-looking key for an Ed25519 one, and survives garbage', async () => {
    const v = verifier();
    const delivery = ed25519Delivery(ed, payload);
    for (const signature of ['v1a,', 'v1a,@@@', `v1a,${Buffer.alloc(64).toString('base64')}`, 'v1a']) {
      expect(await verify(v, { ...delivery, headers: { ...delivery.headers, 'webhook-signature': signature } })).toMatchObject({
        ok: false,
      });
    }
  });

  it('accepts a key published after the cache was filled: fetched again on no match, at most every 30 s', async () => {
    let now = Date.now();
    const v = verifier({ keys: new WebhookKeySet(server.url, { clock: () => now }) });
    expect((await verify(v, ed25519Delivery(ed, payload))).ok).toBe(true);
    const added = ed25519Key();
    server.keys.push(added);
    try {
      now += 10_000;
      expect(await verify(v, ed25519Delivery(added, payload))).toMatchObject({ ok: false }); // within the cooldown
      now += 21_000;
      expect(await verify(v, ed25519Delivery(added, payload))).toMatchObject({ ok: true, scheme: 'ed25519' });
    } finally {
      server.keys.pop();
    }
  });

  it('answers keys-unavailable (a 503 upstream), not a refusal, when the key set cannot be fetched', async () => {
    server.down = true;
    try {
      expect(await verify(verifier(), ed25519Delivery(ed, payload))).toMatchObject({ ok: false, status: 'keys-unavailable' });
    } finally {
      server.down = false;
    }
  });

  it('never fetches keys for an HMAC delivery, and an HMAC signature beside a v1a one still counts', async () => {
    const secret = newSecret();
    const before = server.fetches;
    expect(await verify(verifier({ secrets: [secret] }), signedDelivery(secret, payload))).toMatchObject({ ok: true, scheme: 'hmac' });
    expect(server.fetches).toBe(before);
  });
});

describe('RS256 JWT signatures', () => {
  it('accepts a JWT from a published RSA key with the configured audience, and says the body is not covered', async () => {
    expect(await verify(verifier(), await jwtDelivery(rsa, payload, { audience: AUDIENCE }))).toMatchObject({ ok: true, scheme: 'jwt' });
  });

  it('refuses a wrong audience, a wrong issuer, an expired token, an unknown kid, alg none and HS256 with the public key', async () => {
    const v = verifier();
    const cases = {
      'wrong audience': await jwtDelivery(rsa, payload, { audience: 'https://elsewhere.example' }),
      'wrong issuer': await jwtDelivery(rsa, payload, { audience: AUDIENCE, issuer: 'https://evil.example' }),
      expired: await jwtDelivery(rsa, payload, { audience: AUDIENCE, expiresInSeconds: -120 }),
      'unknown kid': await jwtDelivery(rsaKey(), payload, { audience: AUDIENCE }),
      'alg none': unsignedJwtDelivery(payload, AUDIENCE),
      'HS256 with the public key': await jwtDelivery(rsa, payload, { audience: AUDIENCE, alg: 'HS256', secret: publicKeyAsSecret(rsa) }),
      'an Ed25519 key signing a JWT': await jwtDelivery(ed, payload, { audience: AUDIENCE, alg: 'EdDSA' }),
    };
    const verdicts = Object.fromEntries(await Promise.all(Object.entries(cases).map(async ([name, d]) => [name, await verify(v, d)])));
    for (const [name, verdict] of Object.entries(verdicts)) expect(verdict, name).toMatchObject({ ok: false });
    expect(verdicts.expired.reason).toBe('JWT expired');
    expect(verdicts['unknown kid'].reason).toBe('JWT signed with an unknown key');
    expect(verdicts['wrong audience'].reason).toBe('JWT claim aud invalid');
  });

  it('refuses a JWT issued too long ago, one without iat, and one naming another webhook-id', async () => {
    const v = verifier();
    const old = await jwtDelivery(rsa, payload, { audience: AUDIENCE, issuedAgoSeconds: 660, expiresInSeconds: 600 });
    expect(await verify(v, old)).toMatchObject({ ok: false, reason: 'JWT issued more than 600 s ago' });
    const noIat = await jwtDelivery(rsa, payload, { audience: AUDIENCE, withoutIat: true });
    expect(await verify(v, noIat)).toMatchObject({ ok: false, reason: 'JWT claim iat invalid' });
    const elsewhere = await jwtDelivery(rsa, payload, { audience: AUDIENCE, webhookId: 'msg_another' });
    expect(await verify(v, elsewhere)).toMatchObject({ ok: false, reason: 'JWT names another webhook-id' });
    const fine = await jwtDelivery(rsa, payload, { audience: AUDIENCE });
    expect(await verify(v, fine)).toMatchObject({ ok: true, token: { digest: expect.any(String), expiresAt: expect.any(Number) } });
  });

  it('refuses every JWT when no audience is configured', async () => {
    const verdict = await verify(verifier({ audience: undefined }), await jwtDelivery(rsa, payload, { audience: AUDIENCE }));
    expect(verdict).toEqual({ ok: false, reason: 'JWT-signed deliveries are refused: GEMINI_WEBHOOK_AUDIENCE is not set' });
  });

  it('refuses JWTs and v1a signatures where dynamic webhooks are not set up', async () => {
    const plain = new WebhookSignatureVerifier(async () => [newSecret()]);
    expect(await verify(plain, await jwtDelivery(rsa, payload, { audience: AUDIENCE }))).toMatchObject({ ok: false });
    expect(await verify(plain, ed25519Delivery(ed, payload))).toMatchObject({ ok: false });
  });
});

describe('GEMINI_WEBHOOK_SCHEMES', () => {
  it('a scheme turned off is refused without a key fetch; the ones left on still verify', async () => {
    const secret = newSecret();
    const only = (schemes: Array<'hmac' | 'v1a' | 'jwt'>) =>
      new WebhookSignatureVerifier(async () => [secret], {
        keys: new WebhookKeySet(server.url),
        audience: AUDIENCE,
        issuer: GOOGLE_ISSUER,
        schemes,
      });
    const before = server.fetches;
    const hmacOnly = only(['hmac']);
    expect(await verify(hmacOnly, ed25519Delivery(ed, payload))).toEqual({ ok: false, reason: 'v1a signatures are not accepted here' });
    expect(await verify(hmacOnly, await jwtDelivery(rsa, payload, { audience: AUDIENCE }))).toEqual({
      ok: false,
      reason: 'JWT signatures are not accepted here',
    });
    expect(server.fetches).toBe(before);
    expect(await verify(hmacOnly, signedDelivery(secret, payload))).toMatchObject({ ok: true, scheme: 'hmac' });
    const dynamicOnly = only(['v1a', 'jwt']);
    expect(await verify(dynamicOnly, signedDelivery(secret, payload))).toMatchObject({ ok: false, reason: /not accepted here/ });
    expect(await verify(dynamicOnly, ed25519Delivery(ed, payload))).toMatchObject({ ok: true, scheme: 'ed25519' });
  });
});

describe('WebhookKeySet', () => {
  const jwks = { keys: [ed.publicJwk] };
  const counting = (answer: () => Response | Promise<Response>) => {
    const calls: number[] = [];
    const fetchFn = (async () => {
      calls.push(1);
      return answer();
    }) as unknown as typeof fetch;
    return { calls, fetchFn };
  };

  it('caches for maxAge, refetches on refresh at most once per cooldown, and shares one fetch between concurrent callers', async () => {
    let now = 0;
    const { calls, fetchFn } = counting(() => Response.json(jwks));
    const keys = new WebhookKeySet('http://keys.test/jwks.json', {
      fetch: fetchFn,
      clock: () => now,
      maxAgeMs: 300_000,
      cooldownMs: 30_000,
    });
    await Promise.all([keys.keys(), keys.keys(), keys.keys()]);
    expect(calls).toHaveLength(1);
    now = 10_000;
    await keys.keys({ refresh: true }); // within the cooldown: the cache
    expect(calls).toHaveLength(1);
    now = 31_000;
    await keys.keys({ refresh: true });
    expect(calls).toHaveLength(2);
    await keys.keys();
    now = 31_000 + 300_000;
    await keys.keys();
    expect(calls).toHaveLength(3);
  });

  it('remembers a failed fetch for the cooldown: repeated asks cost no fetch, and the key set is tried again after it', async () => {
    let now = 0;
    let down = true;
    const { calls, fetchFn } = counting(() => (down ? new Response('', { status: 503 }) : Response.json(jwks)));
    const keys = new WebhookKeySet('http://keys.test/jwks.json', { fetch: fetchFn, clock: () => now, cooldownMs: 30_000 });
    for (let i = 0; i < 50; i++) {
      now += 500;
      await expect(keys.keys({ refresh: i % 2 === 0 })).rejects.toThrow(/unavailable: answered 503/);
    }
    expect(calls).toHaveLength(1);
    down = false;
    now = 500 + 30_000; // the cooldown since the one fetch

    await expect(keys.keys()).resolves.toHaveLength(1);
    expect(calls).toHaveLength(2);
  });

  it('throws KeysUnavailableError on a non-2xx, a body that is not a key set, and a timeout', async () => {
    for (const answer of [() => new Response('', { status: 500 }), () => Response.json({ nope: 1 }), () => new Response('not json')]) {
      const keys = new WebhookKeySet('http://keys.test/jwks.json', { fetch: counting(answer).fetchFn });
      await expect(keys.keys()).rejects.toThrow(/webhook keys at http:\/\/keys\.test\/jwks\.json/);
    }
    const hanging = new WebhookKeySet('http://keys.test/jwks.json', {
      timeoutMs: 50,
      fetch: ((_url: string, init: RequestInit) =>
        new Promise((_resolve, reject) => init.signal?.addEventListener('abort', () => reject(new Error('timed out'))))) as typeof fetch,
    });
    await expect(hanging.keys()).rejects.toThrow(/unavailable: timed out/);
  });
});
