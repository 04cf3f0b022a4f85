/**
 * Standard Webhooks verification of inbound Gemini deliveries: HMAC-SHA256
 * over `id.timestamp.rawBody`, ±300 s, any of several secrets (rotation).
 */
import { Webhook, WebhookVerificationError } from 'standardwebhooks';

export class InvalidSecretError extends Error {
  override name = 'InvalidSecretError';
}

/** No usable signing secret yet (a fresh deploy): deliveries are answered 503 so Gemini keeps them for later. */
export class NotConfiguredError extends Error {
  override name = 'NotConfiguredError';
}

export interface ParseOptions {
  /**
   * Skip entries that do not decode instead of refusing the whole value (in
   * AWS: one bad rotation entry must not stop the good ones). Called with the
   * 1-based positions skipped; never with the values.
   */
  onInvalid?: (positions: number[]) => void;
}

/**
 * `whsec_…` secrets separated by spaces or commas, each decoded now, with the
 * same decoder verification uses: a value that passes here cannot fail later.
 * Without `onInvalid`, the first bad entry throws InvalidSecretError naming
 * its position (never its value).
 */
export function parseSigningSecrets(value: string, options: ParseOptions = {}): string[] {
  const entries = value.split(/[\s,]+/).filter(Boolean);
  if (entries.length === 0) throw new InvalidSecretError('no webhook signing secret configured');
  const invalid: number[] = [];
  const secrets = entries.filter((secret, i) => {
    if (decodes(secret)) return true;
    if (!options.onInvalid) throw new InvalidSecretError(`webhook signing secret #${i + 1} is not of the form whsec_<base64>`);
    invalid.push(i + 1);
    return false;
  });
  if (invalid.length > 0) options.onInvalid?.(invalid);
  if (secrets.length === 0) throw new InvalidSecretError('no webhook signing secret decodes (each must be whsec_<base64>)');
  return secrets;
}

function decodes(secret: string): boolean {
  if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret)) return false;
  try {
    new Webhook(secret);
    return true;
  } catch {
    return false;
  }
}

export type Verification = { ok: true; id: string } | { ok: false; reason: string };

export class WebhookSignatureVerifier {
  private readonly verifiers = new Map<string, Webhook>();

  /**
   * `secrets` is asked on every delivery, so a rotated secret is picked up
   * without a restart; when no secret matches it is asked once more with
   * `refresh` (a source with a cache may then look past it).
   */
  constructor(private readonly secrets: (options?: { refresh?: boolean }) => Promise<readonly string[]>) {}

  async verify(rawBody: string, headers: Headers): Promise<Verification> {
    const id = headers.get('webhook-id');
    const timestamp = headers.get('webhook-timestamp');
    const signature = headers.get('webhook-signature');
    if (!id || !timestamp || !signature) return { ok: false, reason: 'missing webhook-id, webhook-timestamp or webhook-signature header' };
    if (!/^\d+$/.test(timestamp)) return { ok: false, reason: 'webhook-timestamp is not unix seconds' };
    const signed = { 'webhook-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
    const tried = await this.secrets();
    const first = this.verifyWith(tried, rawBody, signed);
    if (first !== 'no-match') return first === 'ok' ? { ok: true, id } : { ok: false, reason: first };
    // Perhaps a secret stored since the value was cached (a rotation, a first setup).
    const untried = (await this.secrets({ refresh: true })).filter((s) => !tried.includes(s));
    const second = this.verifyWith(untried, rawBody, signed);
    if (second === 'ok') return { ok: true, id };
    return { ok: false, reason: second === 'no-match' ? 'no matching signature' : second };
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
