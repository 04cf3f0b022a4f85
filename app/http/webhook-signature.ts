/**
 * Verification of inbound Gemini deliveries, fail-closed, ±300 s for every scheme:
 * - static webhooks: Standard Webhooks `v1` HMAC-SHA256 over
 *   `id.timestamp.rawBody`, any of several secrets (rotation);
 * - dynamic (per-request) webhooks: `v1a` Ed25519 over the same content, or an
 *   RS256 JWT, against Google's published keys (webhook-keys.ts). A JWT does
 *   not cover the body: its deliveries come back as `scheme: 'jwt'`, and the
 *   caller must not apply their body.
 */
import { createHash } from 'node:crypto';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { type Config, type WebhookScheme, webhookSchemes } from '../config.ts';
import { KeysUnavailableError, verifiesEd25519, verifyJwt, WebhookKeySet } from './webhook-keys.ts';

/** A request's headers, read by name (a fetch `Headers`, or a plain object behind `get`). */
export interface HeaderReader {
  get(name: string): string | null;
}
/** No usable signing secret yet (a fresh deploy): deliveries are answered 503 so Gemini keeps them for later. */
export class NotConfiguredError extends Error {
  override name = 'NotConfiguredError';
}

export type Verification =
  | { ok: true; id: string; scheme: 'hmac' | 'ed25519' }
  /** `token`: a digest of the JWT (never the JWT), for the receiver's replay binding; valid until `expiresAt` (ms). */
  | { ok: true; id: string; scheme: 'jwt'; token: { digest: string; expiresAt: number } }
  | { ok: false; reason: string; status?: 'keys-unavailable' };

/** Standard Webhooks' replay window, held for every scheme. */
export const TIMESTAMP_TOLERANCE_SECONDS = 300;

export interface DynamicWebhookOptions {
  keys: WebhookKeySet;
  /** Expected `aud` of JWT-signed deliveries; without it they are refused. */
  audience?: string;
  issuer: string;
  /**
   * The schemes accepted (GEMINI_WEBHOOK_SCHEMES; default all three). A
   * scheme turned off is refused without a look at its signature, so
   * `v1a`/JWT junk then costs no key fetch at all.
   */
  schemes?: readonly WebhookScheme[];
}

/** The dynamic-webhook settings from the configuration (the keys cached per process). */
export function dynamicWebhooks(
  config: Pick<
    Config,
    | 'GEMINI_WEBHOOK_KEYS_URL'
    | 'GEMINI_WEBHOOK_KEYS_RETRY_SECONDS'
    | 'GEMINI_WEBHOOK_AUDIENCE'
    | 'GEMINI_WEBHOOK_ISSUER'
    | 'GEMINI_WEBHOOK_SCHEMES'
  >,
): DynamicWebhookOptions {
  return {
    keys: new WebhookKeySet(config.GEMINI_WEBHOOK_KEYS_URL, { cooldownMs: config.GEMINI_WEBHOOK_KEYS_RETRY_SECONDS * 1000 }),
    audience: config.GEMINI_WEBHOOK_AUDIENCE,
    issuer: config.GEMINI_WEBHOOK_ISSUER,
    schemes: webhookSchemes(config.GEMINI_WEBHOOK_SCHEMES),
  };
}

const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export class WebhookSignatureVerifier {
  private readonly verifiers = new Map<string, Webhook>();

  /**
   * `secrets` is asked on every delivery that carries a `v1` signature, so a
   * rotated secret is picked up without a restart; when no secret matches it
   * is asked once more with `refresh` (a source with a cache may then look
   * past it). `dynamic` enables `v1a` and JWT signatures.
   */
  constructor(
    private readonly secrets: (options?: { refresh?: boolean }) => Promise<readonly string[]>,
    private readonly dynamic?: DynamicWebhookOptions,
    private readonly clock: () => number = Date.now,
  ) {}

  /**
   * Throws NotConfiguredError when a `v1`-only delivery meets no configured
   * secret; a key set that cannot be fetched is `status: 'keys-unavailable'`.
   */
  async verify(rawBody: string, headers: HeaderReader): Promise<Verification> {
    const id = headers.get('webhook-id');
    const timestamp = headers.get('webhook-timestamp');
    const signature = headers.get('webhook-signature');
    if (!id || !timestamp || !signature) return { ok: false, reason: 'missing webhook-id, webhook-timestamp or webhook-signature header' };
    if (!/^\d+$/.test(timestamp)) return { ok: false, reason: 'webhook-timestamp is not unix seconds' };
    const now = this.clock();
    if (Math.abs(now / 1000 - Number(timestamp)) > TIMESTAMP_TOLERANCE_SECONDS) {
      return { ok: false, reason: 'webhook-timestamp outside the ±300 s tolerance' };
    }
    const entries = signature.split(' ').filter(Boolean);
    const hmac = entries.filter((entry) => entry.startsWith('v1,'));
    const ed25519 = entries.filter((entry) => entry.startsWith('v1a,')).map((entry) => entry.slice('v1a,'.length));
    const jwts = entries.filter((entry) => JWT.test(entry));
    const reasons: string[] = [];
    let notConfigured: NotConfiguredError | undefined;
    const accepts = (scheme: WebhookScheme) => this.dynamic?.schemes?.includes(scheme) ?? true;
    if (hmac.length > 0 && !accepts('hmac')) reasons.push('v1 signatures are not accepted here (GEMINI_WEBHOOK_SCHEMES)');
    else if (hmac.length > 0) {
      try {
        const verdict = await this.verifyHmac(id, timestamp, hmac.join(' '), rawBody);
        if (verdict === 'ok') return { ok: true, id, scheme: 'hmac' };
        reasons.push(verdict);
      } catch (error) {
        if (!(error instanceof NotConfiguredError)) throw error;
        notConfigured = error; // a dynamic signature beside it may still verify
      }
    }
    try {
      if (ed25519.length > 0) {
        if (!this.dynamic || !accepts('v1a')) reasons.push('v1a signatures are not accepted here');
        else if (await this.verifyEd25519(this.dynamic, `${id}.${timestamp}.${rawBody}`, ed25519))
          return { ok: true, id, scheme: 'ed25519' };
        else reasons.push('no matching v1a signature');
      }
      if (jwts.length > 0 && (!this.dynamic || !accepts('jwt'))) reasons.push('JWT signatures are not accepted here');
      else if (jwts.length > 0) {
        const verdict = await this.verifyJwts(jwts, now, id);
        if (typeof verdict !== 'string') return { ok: true, id, scheme: 'jwt', token: verdict };
        reasons.push(verdict);
      }
    } catch (error) {
      if (!(error instanceof KeysUnavailableError)) throw error;
      return { ok: false, reason: `${error.message}; retry later`, status: 'keys-unavailable' };
    }
    if (notConfigured && reasons.length === 0) throw notConfigured;
    return { ok: false, reason: reasons[0] ?? 'no v1, v1a or JWT signature in webhook-signature' };
  }

  private async verifyHmac(id: string, timestamp: string, signature: string, rawBody: string): Promise<string> {
    const signed = { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
    const tried = await this.secrets();
    const first = this.verifyWith(tried, rawBody, signed);
    if (first !== 'no-match') return first;
    // Perhaps a secret stored since the value was cached (a rotation, a first setup).
    const untried = (await this.secrets({ refresh: true })).filter((s) => !tried.includes(s));
    const second = this.verifyWith(untried, rawBody, signed);
    return second === 'no-match' ? 'no matching signature' : second;
  }

  private async verifyEd25519(dynamic: DynamicWebhookOptions, content: string, signatures: string[]): Promise<boolean> {
    const matches = (keys: Awaited<ReturnType<WebhookKeySet['keys']>>) =>
      signatures.some((signature) => verifiesEd25519(keys, content, signature));
    // Ed25519 signatures name no key: no match may mean a key published since the cache was filled.
    return matches(await dynamic.keys.keys()) || matches(await dynamic.keys.keys({ refresh: true }));
  }

  /** The verified token's digest and expiry, or why none verified. */
  private async verifyJwts(tokens: string[], now: number, webhookId: string): Promise<{ digest: string; expiresAt: number } | string> {
    const { dynamic } = this;
    if (!dynamic) return 'JWT signatures are not accepted here';
    if (!dynamic.audience) return 'JWT-signed deliveries are refused: GEMINI_WEBHOOK_AUDIENCE is not set';
    const expected = { audience: dynamic.audience, issuer: dynamic.issuer, now, webhookId };
    let reason = 'JWT invalid';
    for (const token of tokens) {
      let verdict = await verifyJwt(await dynamic.keys.keys(), token, expected);
      if (!verdict.ok && verdict.unknownKey) verdict = await verifyJwt(await dynamic.keys.keys({ refresh: true }), token, expected);
      if (verdict.ok) return { digest: createHash('sha256').update(token).digest('base64url'), expiresAt: verdict.expiresAt };
      reason = verdict.reason;
    }
    return reason;
  }

  private verifyWith(secrets: readonly string[], rawBody: string, signed: Record<string, string>): 'ok' | 'no-match' | string {
    for (const secret of secrets) {
      try {
        this.verifierFor(secret).verify(rawBody, signed, { jsonParse: false });
        return 'ok';
      } catch (error) {
        // Whatever a secret or a header makes the library throw, it is "not this secret": never a 500.
        if (error instanceof WebhookVerificationError && /timestamp/i.test(error.message)) {
          return 'webhook-timestamp outside the ±300 s tolerance';
        }
      }
    }
    return 'no-match';
  }

  private verifierFor(secret: string): Webhook {
    let verifier = this.verifiers.get(secret);
    if (!verifier) {
      verifier = new Webhook(secret);
      this.verifiers.set(secret, verifier);
    }
    return verifier;
  }
}
