/**
 * The stream -> effects mapping settings, shared by the stack's event source
 * mapping and the local runtime's emulation of it.
 */
export const EFFECTS_MAPPING = {
  batchSize: 10,
  /** Retries after the first attempt, as Lambda counts them. */
  retryAttempts: 10,
  maxRecordAgeSeconds: 24 * 3600,
} as const;
