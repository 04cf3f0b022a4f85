/**
 * The values no log line may hold (the Gemini and Agent Platform API keys this
 * process was given) and the one redaction of them, apart from the logger so
 * that what registers a key (the poller, which a CLI bundle also carries)
 * does not bring Powertools with it.
 */

/** What a secret is written as. */
export const REDACTED = '[redacted]';

/** The values no log line holds, longest first (a key inside a longer one is still found whole). */
let secrets: string[] = [];

/**
 * Values this process must never log: the Gemini and Agent Platform API keys it
 * was given. Process-wide, as a key given to one Ratchet in a process is as
 * secret in every other one's lines.
 */
export function neverLogged(values: Iterable<string | undefined>): void {
  const added = [...values].filter((value): value is string => Boolean(value) && !secrets.includes(value as string));
  if (added.length > 0) secrets = [...secrets, ...added].sort((a, b) => b.length - a.length);
}

/** `text` with every value given to `neverLogged` written as [redacted]: the one redaction, for all text logged. */
export function redacted(text: string): string {
  let clean = text;
  for (const secret of secrets) if (clean.includes(secret)) clean = clean.split(secret).join(REDACTED);
  return clean;
}
