/** Runs once per batch that succeeded (an EventBridge rule on Ratchet's bus). */

import type { StateChangedEvent } from '@ratchet/client/receiver';
import type { EventBridgeEvent } from 'aws-lambda';

export const handler = async (
  event: EventBridgeEvent<'Operation State Changed', StateChangedEvent['data'] & { idempotencyKey: string }>,
) => {
  const { name, result, idempotencyKey } = event.detail;
  // Your work here, once per idempotencyKey (EventBridge delivers at least once).
  console.log(JSON.stringify({ idempotencyKey, name, output: result?.outputUri }));
};
