/**
 * Rows Ratchet 0.1 left in the file in DynamoDB's JSON (its effects queue
 * held stream records): read once more, so an effect queued before an upgrade
 * is still delivered. Only the types Ratchet ever wrote into those records
 * are read; this is the one place the engine meets that format, and only for
 * rows written before schema version 4.
 */

import { InvalidStreamRecordError, type Transition, transitionOf } from '../../app/effects/transition.ts';
import { providerNumber } from '../../core/provider-values.ts';
import type { OperationRecord } from '../../core/reducer.ts';

type AttributeValue = { S?: string; N?: string; BOOL?: boolean; NULL?: boolean; M?: Record<string, AttributeValue>; L?: AttributeValue[] };

/** The transition a 0.1 stream record held. */
export function legacyTransition(record: { dynamodb?: unknown }): Transition {
  const image = (record.dynamodb as { NewImage?: Record<string, AttributeValue> } | undefined)?.NewImage;
  if (!image) throw new InvalidStreamRecordError('a queued 0.1 stream record has no NewImage');
  return transitionOf(plain({ M: image }) as OperationRecord, 'a queued 0.1 stream record');
}

function plain(value: AttributeValue): unknown {
  if (value.S !== undefined) return value.S;
  // A number no JavaScript number holds exactly stays its text, as the provider-values rules have it.
  if (value.N !== undefined) return providerNumber(value.N);
  if (value.BOOL !== undefined) return value.BOOL;
  if (value.NULL) return null;
  if (value.L) return value.L.map(plain);
  if (value.M) return Object.fromEntries(Object.entries(value.M).map(([key, inner]) => [key, plain(inner)]));
  throw new InvalidStreamRecordError('a queued 0.1 stream record holds a type Ratchet never wrote');
}
