/**
 * The history table described once, for the stack (lib/ratchet.ts) and the
 * functions and engines that write and read it: keys, retention, and which
 * stream records it keeps. Plain values only, so the construct can import
 * them without loading any function's code.
 */
/** The stream records history keeps: every applied write (a state change, a same-state refresh, a track, the overdue mark). */
export const HISTORY_FILTER = {
  eventName: ['INSERT', 'MODIFY'],
  dynamodb: { NewImage: { writeKind: { S: ['state-change', 'refresh', 'track', 'overdue'] } } },
} as const;

/** The stream mapping's settings, the stack's and the local runtime's. */
export const HISTORY_MAPPING = { batchSize: 100, retryAttempts: 10 } as const;

export const HISTORY_PARTITION_KEY = 'name';
export const HISTORY_SORT_KEY = 'version';
export const HISTORY_TTL_ATTRIBUTE = 'expiresAt';
