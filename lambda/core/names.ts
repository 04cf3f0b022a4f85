/**
 * Operation names. Gemini spells the same batch `batches/123` in the API and
 * `batch_123` in some webhook payloads; every name is normalised once, at the
 * edge, to the API's resource-name form.
 */
import type { OperationKind } from './lifecycle.ts';

export class InvalidNameError extends Error {
  override name = 'InvalidNameError';
}

const MAX_NAME_LENGTH = 512;
// Resource-name characters: letters, digits and -_./:@ (no spaces, no control characters).
const NAME_CHARS = /^[A-Za-z0-9][A-Za-z0-9\-_.:@/]*$/;

export function normalizeOperationName(raw: string): string {
  const name = raw.trim();
  if (name.length === 0 || name.length > MAX_NAME_LENGTH || !NAME_CHARS.test(name) || name.includes('//') || name.endsWith('/')) {
    throw new InvalidNameError(`not an operation name: ${JSON.stringify(raw.slice(0, 80))}`);
  }
  const batchId = /^batch_(.+)$/.exec(name)?.[1];
  if (batchId) return `batches/${batchId}`;
  const interactionId = /^interaction_(.+)$/.exec(name)?.[1];
  if (interactionId) return `interactions/${interactionId}`;
  return name;
}

/** The kind of work a (normalised) name refers to; decides how reconcile polls it. */
export function kindOfName(name: string): OperationKind {
  if (name.startsWith('batches/')) return 'batch';
  if (name.startsWith('interactions/')) return 'interaction';
  if (/^models\/[^/]+\/operations\//.test(name)) return 'video';
  return 'operation';
}
