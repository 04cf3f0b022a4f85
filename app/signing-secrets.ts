/**
 * Standard Webhooks' `whsec_<base64>` secrets, as a setting holds them: the
 * ones Gemini's deliveries are verified with (app/http/webhook-signature.ts)
 * and the one effects are signed with (app/effects/webhook-sink.ts). Here,
 * apart from both, so neither imports the other.
 */
import { Webhook } from 'standardwebhooks';
import { listOf } from './config.ts';

export class InvalidSecretError extends Error {
  override name = 'InvalidSecretError';
}

export interface ParseOptions {
  /** The setting the value comes from, named in the error (default: WEBHOOK_SIGNING_SECRETS). */
  variable?: string;
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
  const { variable = 'WEBHOOK_SIGNING_SECRETS' } = options;
  const entries = listOf(value);
  if (entries.length === 0) throw new InvalidSecretError(`${variable} holds no secret (expected whsec_<base64>)`);
  const invalid: number[] = [];
  const secrets = entries.filter((secret, i) => {
    if (decodes(secret)) return true;
    if (!options.onInvalid) {
      const which = entries.length > 1 ? `its secret #${i + 1}` : 'its secret';
      throw new InvalidSecretError(
        `${variable}: ${which} is not of the form whsec_<base64> (a secret Gemini shows, or openssl rand -base64 32 after whsec_)`,
      );
    }
    invalid.push(i + 1);
    return false;
  });
  if (invalid.length > 0) options.onInvalid?.(invalid);
  if (secrets.length === 0) throw new InvalidSecretError(`${variable}: no secret decodes (each must be whsec_<base64>)`);
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
