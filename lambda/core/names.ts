/**
 * Operation names are Google resource names, checked per kind at the edge
 * (webhooks, `POST /operations`, `GET /operations/{name}`) and again by the
 * poller before any request to Gemini. Gemini spells the same batch
 * `batches/123` in the API and `batch_123` (or a bare `123`) in some webhook
 * payloads; every name is normalised once to the API's form.
 *
 * A name reaches Gemini as a URL path, so nothing that could move that path
 * elsewhere passes: no `.` or `..` segment, no empty segment, no `:` (custom
 * methods), no `%`, `?` or `#`.
 */
import type { OperationKind } from './lifecycle.ts';

export class InvalidNameError extends Error {
  override name = 'InvalidNameError';
}

export const MAX_NAME_BYTES = 512;

// One path segment: starts with a letter or digit (so never `.` or `..`), then letters, digits, `-`, `_`, `.`.
const ID = '[A-Za-z0-9][A-Za-z0-9_.-]*';

/** The grammar of each kind's names. */
export const NAME_GRAMMAR: Readonly<Record<OperationKind, RegExp>> = {
  batch: new RegExp(`^batches/${ID}$`),
  video: new RegExp(`^models/${ID}/operations/${ID}$`),
  interaction: new RegExp(`^interactions/${ID}$`),
  operation: new RegExp(`^operations/${ID}$`),
};

const BARE_ID = new RegExp(`^${ID}$`);
const KINDS = Object.keys(NAME_GRAMMAR) as OperationKind[];

/**
 * The canonical name for `raw`, or InvalidNameError. `family` is the kind a
 * webhook event announces: for `batch` and `interaction` it gives a bare id
 * its prefix, and the name must then be of that kind.
 */
export function normalizeOperationName(raw: string, family?: OperationKind): string {
  const name = canonical(raw.trim(), family);
  const kind = name === undefined ? undefined : kindOf(name);
  if (name === undefined || kind === undefined || Buffer.byteLength(name) > MAX_NAME_BYTES) {
    throw new InvalidNameError(
      `not an operation name: ${JSON.stringify(raw.slice(0, 80))} ` +
        '(expected batches/{id}, models/{model}/operations/{id}, interactions/{id} or operations/{id}; ' +
        `no "." or ".." segment, at most ${MAX_NAME_BYTES} bytes)`,
    );
  }
  if (family && kind !== family) throw new InvalidNameError(`a ${family} event names a ${kind}: ${JSON.stringify(name)}`);
  return name;
}

function canonical(name: string, family: OperationKind | undefined): string | undefined {
  const batchId = /^batch_(.+)$/.exec(name)?.[1];
  if (batchId) return `batches/${batchId}`;
  const interactionId = /^interaction_(.+)$/.exec(name)?.[1];
  if (interactionId) return `interactions/${interactionId}`;
  if (BARE_ID.test(name)) {
    if (family === 'batch') return `batches/${name}`;
    if (family === 'interaction') return `interactions/${name}`;
    return undefined;
  }
  return name;
}

function kindOf(name: string): OperationKind | undefined {
  return KINDS.find((kind) => NAME_GRAMMAR[kind].test(name));
}

/** The kind of work a (normalised, valid) name refers to; decides how reconcile polls it. */
export function kindOfName(name: string): OperationKind {
  const kind = kindOf(name);
  if (!kind) throw new InvalidNameError(`not an operation name: ${JSON.stringify(name.slice(0, 80))}`);
  return kind;
}

/** True when `name` is a well-formed name of `kind`: the poller's second line of defence. */
export function isNameOfKind(name: string, kind: OperationKind): boolean {
  return Buffer.byteLength(name) <= MAX_NAME_BYTES && NAME_GRAMMAR[kind].test(name);
}
