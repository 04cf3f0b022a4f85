/**
 * Dynamic (per-request) Gemini webhooks are signed with Google's keys, not a
 * shared secret: Standard Webhooks `v1a` (Ed25519 over `id.timestamp.rawBody`)
 * or an RS256 JWT in `webhook-signature`. Both are checked against the JSON Web
 * Key Set published at GEMINI_WEBHOOK_KEYS_URL. Fail closed: a key set that
 * cannot be fetched is KeysUnavailableError (the API answers 503, Gemini
 * retries), never an acceptance.
 */
import { createPublicKey, verify } from 'node:crypto';
import type { JSONWebKeySet, JWK } from 'jose';

export class KeysUnavailableError extends Error {
  override name = 'KeysUnavailableError';
}

export interface KeySetOptions {
  /** How long a fetched key set is used before it is fetched again. */
  maxAgeMs?: number;
  /** A refetch asked for because no key matched, or after a failed fetch, happens at most this often. */
  cooldownMs?: number;
  timeoutMs?: number;
  fetch?: typeof fetch;
  clock?: () => number;
}

/**
 * The published keys, cached; fetched again when old, or (at most every
 * cooldown, 30 s) when no key matched or the last fetch failed.
 */
export class WebhookKeySet {
  private cached?: { keys: JWK[]; at: number };
  private lastFetch = Number.NEGATIVE_INFINITY;
  /** The last fetch's failure, answered without fetching until the cooldown has passed. */
  private failed?: KeysUnavailableError;
  private inFlight?: Promise<JWK[]>;
  private readonly maxAgeMs: number;
  private readonly cooldownMs: number;
  private readonly timeoutMs: number;
  private readonly clock: () => number;

  constructor(
    readonly url: string,
    private readonly options: KeySetOptions = {},
  ) {
    this.maxAgeMs = options.maxAgeMs ?? 5 * 60_000;
    this.cooldownMs = options.cooldownMs ?? 30_000;
    this.timeoutMs = options.timeoutMs ?? 3_000;
    this.clock = options.clock ?? Date.now;
  }

  /**
   * The keys; with `refresh` (no key matched) fetched past the cache unless the
   * last fetch was within the cooldown. A fetch that fails throws
   * KeysUnavailableError: the delivery cannot be judged now.
   */
  async keys(options: { refresh?: boolean } = {}): Promise<JWK[]> {
    const now = this.clock();
    // Negative cache: a fetch that failed is not tried again within the cooldown, whatever the
    // requests that ask (a `v1a,<junk>` header costs no secret to send).
    if (this.failed && now - this.lastFetch < this.cooldownMs) throw this.failed;
    const fresh = this.cached && now - this.cached.at < this.maxAgeMs;
    if (this.cached && (options.refresh ? now - this.lastFetch < this.cooldownMs : fresh)) return this.cached.keys;
    this.inFlight ??= this.fetchKeys().finally(() => {
      this.inFlight = undefined;
    });
    return this.inFlight;
  }

  private async fetchKeys(): Promise<JWK[]> {
    this.lastFetch = this.clock();
    try {
      const keys = await this.fetchOnce();
      this.failed = undefined;
      return keys;
    } catch (error) {
      this.failed = error as KeysUnavailableError;
      throw error;
    }
  }

  private async fetchOnce(): Promise<JWK[]> {
    let body: unknown;
    try {
      const response = await (this.options.fetch ?? fetch)(this.url, {
        signal: AbortSignal.timeout(this.timeoutMs),
        redirect: 'error',
        headers: { accept: 'application/json' },
      });
      if (!response.ok) throw new Error(`answered ${response.status}`);
      body = await response.json();
    } catch (error) {
      throw new KeysUnavailableError(`webhook keys at ${this.url} unavailable: ${(error as Error).message}`);
    }
    const keys = (body as Partial<JSONWebKeySet> | null)?.keys;
    if (!Array.isArray(keys)) throw new KeysUnavailableError(`webhook keys at ${this.url}: not a JSON Web Key Set`);
    this.cached = { keys: keys.filter((key): key is JWK => typeof key === 'object' && key !== null), at: this.clock() };
    return this.cached.keys;
  }
}

/** Whether one `v1a` signature (base64) is an Ed25519 signature of `signedContent` by one of the keys. */
export function verifiesEd25519(keys: readonly JWK[], signedContent: string, signature: string): boolean {
  const bytes = Buffer.from(signature, 'base64');
  if (bytes.length !== 64) return false;
  const content = Buffer.from(signedContent);
  return keys.some((key) => {
    if (key.kty !== 'OKP' || key.crv !== 'Ed25519' || typeof key.x !== 'string' || key.d !== undefined) return false;
    if (key.use !== undefined && key.use !== 'sig') return false;
    try {
      return verify(null, content, createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.x }, format: 'jwk' }), bytes);
    } catch {
      return false; // a key that does not import is not this key
    }
  });
}

/** How long after its `iat` a delivery's JWT is still taken: a captured token is worth minutes, not hours. */
export const JWT_MAX_AGE_SECONDS = 600;

export type JwtVerdict = { ok: true; expiresAt: number } | { ok: false; reason: string; unknownKey?: boolean };

/**
 * An RS256 JWT checked against the RSA keys: signature, `aud`, `iss`, an `exp`
 * that must be present and not past, an `iat` within JWT_MAX_AGE_SECONDS, and
 * (when the token names one) `webhook_id` equal to the delivery's
 * `webhook-id`. No other algorithm is accepted (`none`, HS256 with the public
 * key as secret, …). jose loads on the first JWT: deliveries signed with the
 * shared secret never need it.
 */
export async function verifyJwt(
  keys: readonly JWK[],
  token: string,
  expected: { audience: string; issuer: string; now: number; webhookId: string },
): Promise<JwtVerdict> {
  const rsa = keys.filter((key) => key.kty === 'RSA' && (key.use === undefined || key.use === 'sig'));
  const { createLocalJWKSet, errors, jwtVerify } = await import('jose');
  try {
    const { payload } = await jwtVerify(token, createLocalJWKSet({ keys: rsa }), {
      algorithms: ['RS256'],
      audience: expected.audience,
      issuer: expected.issuer,
      requiredClaims: ['exp', 'iat'],
      maxTokenAge: JWT_MAX_AGE_SECONDS,
      currentDate: new Date(expected.now),
      clockTolerance: 30,
    });
    if (payload.webhook_id !== undefined && payload.webhook_id !== expected.webhookId)
      return { ok: false, reason: 'JWT names another webhook-id' };
    return { ok: true, expiresAt: (payload.exp as number) * 1000 };
  } catch (error) {
    if (error instanceof errors.JWKSNoMatchingKey) return { ok: false, reason: 'JWT signed with an unknown key', unknownKey: true };
    if (error instanceof errors.JWTExpired)
      return { ok: false, reason: error.claim === 'iat' ? `JWT issued more than ${JWT_MAX_AGE_SECONDS} s ago` : 'JWT expired' };
    if (error instanceof errors.JWTClaimValidationFailed) return { ok: false, reason: `JWT claim ${error.claim} invalid` };
    if (error instanceof errors.JOSEAlgNotAllowed) return { ok: false, reason: 'JWT algorithm not allowed (RS256 only)' };
    return { ok: false, reason: 'JWT invalid' };
  }
}
