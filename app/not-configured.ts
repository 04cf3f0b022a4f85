/**
 * A secret setting that is not set yet: what the stack stores in each secret
 * until `npm run connect` sets it, and how a function tells it from a value.
 * Plain values only, so the construct can import them without loading the
 * Secrets Manager client.
 */
/** What the stack stores in each secret until it is set: "not configured", never a value to use. */
export const NOT_CONFIGURED = 'not-configured';

/** The value, or undefined when it is not configured (empty, or the stack's placeholder). */
export function configuredValue(value: string | undefined): string | undefined {
  const trimmed = value?.trim() ?? '';
  return trimmed === '' || trimmed === NOT_CONFIGURED ? undefined : trimmed;
}
