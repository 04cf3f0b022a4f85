/**
 * Operation names are the provider's resource names (Google's as they are,
 * every other provider's behind its name: `openai/batches/{id}`), checked per kind at the edge
 * (webhooks, `POST /operations`, `GET /operations/{name}`) and again by the
 * poller before any request to Gemini. Gemini spells the same batch
 * `batches/123` in the API and `batch_123` (or a bare `123`) in some webhook
 * payloads; every name is normalised once to the API's form.
 *
 * A name reaches Google as a URL path, so nothing that could move that path
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
// An Agent Platform resource lives in one project and one location.
const PLATFORM = `projects/${ID}/locations/${ID}`;

/** The grammar of each kind's names. */
export const NAME_GRAMMAR: Readonly<Record<OperationKind, RegExp>> = {
  batch: new RegExp(`^batches/${ID}$`),
  video: new RegExp(`^models/${ID}/operations/${ID}$`),
  interaction: new RegExp(`^interactions/${ID}$`),
  operation: new RegExp(`^operations/${ID}$`),
  'platform-batch': new RegExp(`^${PLATFORM}/batchPredictionJobs/${ID}$`),
  'platform-video': new RegExp(`^${PLATFORM}/publishers/google/models/${ID}/operations/${ID}$`),
  'platform-interaction': new RegExp(`^${PLATFORM}/interactions/${ID}$`),
  // fileSearchStores.importFile and uploadToFileSearchStore answer these long-running operations.
  'file-search': new RegExp(`^fileSearchStores/${ID}/(upload/)?operations/${ID}$`),
  'platform-tuning': new RegExp(`^${PLATFORM}/tuningJobs/${ID}$`),
  // Every other provider's names start with the provider (providers/<provider>/).
  'openai-batch': new RegExp(`^openai/batches/${ID}$`),
  'openai-response': new RegExp(`^openai/responses/${ID}$`),
  'openai-video': new RegExp(`^openai/videos/${ID}$`),
  'openai-fine-tuning': new RegExp(`^openai/fine_tuning/jobs/${ID}$`),
  'openai-eval-run': new RegExp(`^openai/evals/${ID}/runs/${ID}$`),
  'anthropic-batch': new RegExp(`^anthropic/messages/batches/${ID}$`),
  'bedrock-batch': new RegExp(`^bedrock/[a-z]{2}(-[a-z]+)+-[0-9]+/[0-9]{12}/model-invocation-jobs/${ID}$`),
  'azure-openai-batch': new RegExp(`^azure-openai/${ID}/batches/${ID}$`),
};

/** The forms a name may take, for messages. */
export const NAME_FORMS =
  'batches/{id}, models/{model}/operations/{id}, interactions/{id}, operations/{id}, ' +
  'fileSearchStores/{store}/operations/{id}, fileSearchStores/{store}/upload/operations/{id}, ' +
  'projects/{p}/locations/{l}/batchPredictionJobs/{id}, projects/{p}/locations/{l}/publishers/google/models/{model}/operations/{id}, ' +
  'projects/{p}/locations/{l}/interactions/{id}, projects/{p}/locations/{l}/tuningJobs/{id}, ' +
  'openai/batches/{id}, openai/responses/{id}, openai/videos/{id}, openai/fine_tuning/jobs/{id}, openai/evals/{eval}/runs/{id}, ' +
  'anthropic/messages/batches/{id}, bedrock/{region}/{account}/model-invocation-jobs/{id} or azure-openai/{resource}/batches/{id}';

const BARE_ID = new RegExp(`^${ID}$`);
const KINDS = Object.keys(NAME_GRAMMAR) as OperationKind[];

/**
 * The canonical name for `raw`, or InvalidNameError. `family` is the kind a
 * webhook event announces; it only gives a bare id its prefix: `batches/` in
 * a batch event, `interactions/` in an interaction or a video event (video on
 * the Gemini API is a background interaction now). A whole name is read by
 * its own shape, whatever event carries it.
 */
export function normalizeOperationName(raw: string, family?: OperationKind): string {
  const name = canonical(raw.trim(), family);
  if (name === undefined || kindOf(name) === undefined || Buffer.byteLength(name) > MAX_NAME_BYTES) {
    throw new InvalidNameError(
      `not an operation name: ${JSON.stringify(raw.slice(0, 80))} ` +
        `(expected ${NAME_FORMS}; no "." or ".." segment, at most ${MAX_NAME_BYTES} bytes)`,
    );
  }
  return name;
}

function canonical(name: string, family: OperationKind | undefined): string | undefined {
  const batchId = /^batch_(.+)$/.exec(name)?.[1];
  if (batchId) return `batches/${batchId}`;
  const interactionId = /^interaction_(.+)$/.exec(name)?.[1];
  if (interactionId) return `interactions/${interactionId}`;
  if (BARE_ID.test(name)) {
    if (family === 'batch') return `batches/${name}`;
    if (family === 'interaction' || family === 'video') return `interactions/${name}`;
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

/** The project and location an Agent Platform name lives in; undefined for a Gemini API name. */
export function platformScopeOf(name: string): { project: string; location: string } | undefined {
  const match = /^projects\/([^/]+)\/locations\/([^/]+)\//.exec(name);
  return match ? { project: match[1] as string, location: match[2] as string } : undefined;
}
