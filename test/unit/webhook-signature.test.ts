import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebhookSignatureVerifier } from '../../app/http/webhook-signature.ts';
import { InvalidSecretError, parseSigningSecrets } from '../../app/signing-secrets.ts';
import { newSecret, sign, signedDelivery } from '../support/deliveries.ts';

const verifierFor = (...secrets: string[]) => new WebhookSignatureVerifier(async () => secrets);
const verify = (verifier: WebhookSignatureVerifier, d: { body: string; headers: Record<string, string> }) =>
  verifier.verify(d.body, new Headers(d.headers));

afterEach(() => {
  vi.useRealTimers();
});

describe('WebhookSignatureVerifier', () => {
  it('accepts a delivery signed with the secret and returns its id', async () => {
    const secret = newSecret();
    const delivery = signedDelivery(secret, { type: 'ping' }, { id: 'msg_42' });
    expect(await verify(verifierFor(secret), delivery)).toEqual({ ok: true, id: 'msg_42', scheme: 'hmac' });
  });

  it('accepts any configured secret and any of several signatures (rotation)', async () => {
    const [oldSecret, newOne, unrelated] = [newSecret(), newSecret(), newSecret()];
    const delivery = signedDelivery(newOne, { type: 'ping' });
    expect((await verify(verifierFor(oldSecret, newOne), delivery)).ok).toBe(true);
    const { headers } = delivery;
    const both = {
      ...headers,
      'webhook-signature': `${sign(unrelated, String(headers['webhook-id']), Number(headers['webhook-timestamp']), delivery.body)} ${headers['webhook-signature']}`,
    };
    expect((await verify(verifierFor(newOne), { body: delivery.body, headers: both })).ok).toBe(true);
  });

  it('asks past a cached value once when no secret matches: a secret stored since is found, a forged signature is still refused', async () => {
    const [cached, stored] = [newSecret(), newSecret()];
    const asked: Array<boolean | undefined> = [];
    const verifier = new WebhookSignatureVerifier(async (options) => {
      asked.push(options?.refresh);
      return options?.refresh ? [cached, stored] : [cached];
    });
    expect((await verify(verifier, signedDelivery(cached, { type: 'ping' }))).ok).toBe(true);
    expect(asked).toEqual([undefined]); // a match needs no second look
    expect(await verify(verifier, signedDelivery(stored, { type: 'ping' }))).toMatchObject({ ok: true });
    expect(asked).toEqual([undefined, undefined, true]);
    expect(await verify(verifier, signedDelivery(newSecret(), { type: 'ping' }))).toEqual({ ok: false, reason: 'no matching signature' });
  });

  it('rejects a wrong secret, a changed body and missing headers', async () => {
    const secret = newSecret();
    const delivery = signedDelivery(secret, { type: 'ping' });
    expect(await verify(verifierFor(newSecret()), delivery)).toEqual({ ok: false, reason: 'no matching signature' });
    expect(await verify(verifierFor(secret), { ...delivery, body: `${delivery.body} ` })).toEqual({
      ok: false,
      reason: 'no matching signature',
    });
    const { 'webhook-signature': _, ...unsigned } = delivery.headers;
    expect((await verify(verifierFor(secret), { ...delivery, headers: unsigned })).ok).toBe(false);
    expect((await verify(verifierFor(secret), { ...delivery, headers: { ...delivery.headers, 'webhook-timestamp': 'soon' } })).ok).toBe(
      false,
    );
  });

  it('accepts timestamps within ±300 s and rejects those beyond', async () => {
    vi.useFakeTimers({ now: new Date('2026-11-30T10:00:00Z') });
    const now = Math.floor(Date.now() / 1000);
    const secret = newSecret();
    const at = (timestamp: number) => verify(verifierFor(secret), signedDelivery(secret, { type: 'ping' }, { timestamp }));
    expect((await at(now - 300)).ok).toBe(true);
    expect((await at(now + 300)).ok).toBe(true);
    expect(await at(now - 301)).toEqual({ ok: false, reason: 'webhook-timestamp outside the ±300 s tolerance' });
    expect(await at(now + 301)).toEqual({ ok: false, reason: 'webhook-timestamp outside the ±300 s tolerance' });
  });
});

describe('parseSigningSecrets', () => {
  it('splits on spaces and commas', () => {
    expect(parseSigningSecrets('whsec_YQ== whsec_Yg==,whsec_Yw==')).toEqual(['whsec_YQ==', 'whsec_Yg==', 'whsec_Yw==']);
  });

  it('rejects a secret not of the whsec_ form without echoing it', () => {
    expect(() => parseSigningSecrets('whsec_YQ== hunter2')).toThrow(
      /^WEBHOOK_SIGNING_SECRETS: its secret #2 is not of the form whsec_<base64>/,
    );
    expect(() => parseSigningSecrets('hunter2', { variable: 'EFFECTS_SIGNING_SECRET' })).toThrow(
      /^EFFECTS_SIGNING_SECRET: its secret is not of the form whsec_<base64>/,
    );
    expect(() => parseSigningSecrets(' ')).toThrow(InvalidSecretError);
  });

  it('decodes each entry now: one that looks right but does not decode is refused with its position', () => {
    const good = newSecret();
    // Matches whsec_<base64 characters>, but 3 characters are not base64.
    expect(() => parseSigningSecrets(`whsec_abc ${good}`)).toThrow(/^WEBHOOK_SIGNING_SECRETS: its secret #1 is not of the form/);
    expect(() => parseSigningSecrets(`whsec_abc ${good}`)).toThrow(InvalidSecretError);
  });

  it('with onInvalid, skips what does not decode, says where, and keeps the rest', async () => {
    const good = newSecret();
    const skipped: number[][] = [];
    const secrets = parseSigningSecrets(`whsec_abc ${good} whsec_x`, { onInvalid: (positions) => skipped.push(positions) });
    expect({ secrets, skipped }).toEqual({ secrets: [good], skipped: [[1, 3]] });
    expect(() => parseSigningSecrets('whsec_abc', { onInvalid: () => {} })).toThrow(/WEBHOOK_SIGNING_SECRETS: no secret decodes/);
  });
});

describe('WebhookSignatureVerifier never answers 500', () => {
  it('treats a secret the library cannot decode as "not this secret": a wrong signature is a 401 reason, a right one still verifies', async () => {
    const good = newSecret();
    const verifier = verifierFor('whsec_abc', good);
    expect(await verify(verifier, signedDelivery(good, { type: 'ping' }, { id: 'm1' }))).toEqual({ ok: true, id: 'm1', scheme: 'hmac' });
    expect(await verify(verifier, signedDelivery(newSecret(), { type: 'ping' }))).toEqual({ ok: false, reason: 'no matching signature' });
  });
});
