/**
 * The effects path's settings, shared by the stack (Pipe, queues, event
 * source) and the local runtime's emulation of them.
 */

/** The EventBridge sink's events: what an `onStateChange` rule matches. */
export const EVENTBRIDGE_SOURCE = 'ratchet';
export const EVENTBRIDGE_DETAIL_TYPE = 'Operation State Changed';
/** A job found open past its kind's limit (OVERDUE_AFTER): what an `onOverdue` rule matches. */
export const EVENTBRIDGE_OVERDUE_DETAIL_TYPE = 'Operation Overdue';

/** The table's stream -> effects queue Pipe. */
export const EFFECTS_PIPE = {
  batchSize: 10,
  /** A send fails only when the queue is unavailable: retry (nearly) for ever rather than drop. */
  retryAttempts: 185,
} as const;

/** The effects queue and its Lambda event source. */
export const EFFECTS_QUEUE = {
  batchSize: 10,
  /** SQS keeps a message at most 14 days: the retry window must end before. */
  retentionDays: 14,
  /** Receives before SQS itself moves a message to the FIFO dead-letter queue: a safety net for a handler that crashes. */
  maxReceiveCount: 200,
} as const;
