/**
 * The effects ledger: which (sink, transition) pairs were delivered. Checked
 * before a delivery and written after it, so a replayed batch skips what was
 * already done. (A crash between delivery and the ledger write redelivers
 * once; the stable webhook-id lets the receiver drop it.)
 */

/** How a delivery went: on which attempt, and what the attempt before it came to (a receiver's outage, in words). */
export interface DeliveryAttempts {
  attempts: number;
  earlierFailure?: string;
}

export interface EffectLedger {
  isDelivered(sink: string, key: string): Promise<boolean>;
  markDelivered(sink: string, key: string, attempts?: DeliveryAttempts): Promise<void>;
}

/** How long a delivery is remembered (both engines). */
export const LEDGER_RETENTION_SECONDS = 30 * 24 * 3600;
