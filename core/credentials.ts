/**
 * Several Gemini API keys by label (GEMINI_API_KEYS, `label=key,label=key`):
 * the one reading of the pairs, for the server's configuration and for
 * `trackJobs`, which finds the label of its client's key in the same string.
 * Pure.
 */

/** A key's label: names it in records, logs and the console (the key itself never shows). */
export const CREDENTIAL_LABEL = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/**
 * The keys by label, in order (the first polls jobs that name none), commas
 * or spaces between pairs; undefined when a pair is not `label=key`, a label
 * is malformed or repeats.
 */
export function labelledKeysOf(value: string): Array<{ label: string; apiKey: string }> | undefined {
  const pairs = value
    .split(/[\s,]+/)
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf('=');
      return at < 0 ? { label: '', apiKey: '' } : { label: pair.slice(0, at), apiKey: pair.slice(at + 1) };
    });
  const labels = new Set(pairs.map((p) => p.label));
  if (pairs.length === 0 || labels.size !== pairs.length) return undefined;
  return pairs.every((p) => CREDENTIAL_LABEL.test(p.label) && p.apiKey.length > 0) ? pairs : undefined;
}

/** GEMINI_API_KEYS read (every provider's `*_API_KEYS` reads the same way). */
export const geminiKeysOf = labelledKeysOf;
