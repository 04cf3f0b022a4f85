/**
 * `ratchet/genai`: jobs tracked the moment they are created.
 *
 *   const ai = trackJobs(new GoogleGenAI({ apiKey }), new RatchetClient({ url }));
 *   const job = await ai.batches.create({ model, src });   // tracked before this returns
 *
 * Returns the same @google/genai client (2.x or 3.x, on the Gemini API or in
 * Agent Platform mode), with `batches.create`, `batches.createEmbeddings`,
 * `models.generateVideos`, background `interactions.create` (not streamed),
 * `fileSearchStores.importFile` and `uploadToFileSearchStore` (where the
 * SDK has them) and, in Agent Platform mode, `tunings.tune` each tracking
 * the job it created, with the request's webhook
 * `userMetadata` / `user_metadata` as the job's metadata. Video on the Gemini
 * API is a background interaction now (`gemini-omni-*`); `generateVideos`
 * (Veo) runs where the SDK sends it, the Agent Platform, and SDK 3.x throws
 * it on the Gemini API before any request, untracked. A tracking failure
 * never hides the created job: the job is returned, the failure goes to
 * `onTrackError` and the log, and reconcile's hourly discovery still finds a
 * batch; track a video or an interaction again yourself (`client.track`).
 */
import type { GoogleGenAI } from '@google/genai';
import { geminiKeysOf } from '../core/credentials.ts';

export interface TrackJobsOptions {
  /**
   * The label of this client's API key in the server's GEMINI_API_KEYS: recorded with each job, so reconcile polls
   * it with the key that created it. Default: the label whose key this client was made with, when `keys` (the
   * same label=key pairs) is given; none when it cannot tell (the server's first key then polls the job).
   */
  credential?: string;
  /** `GEMINI_API_KEYS` as the server has it (`label=key,…`): the label of this client's key is found in it, never sent. */
  keys?: string;
  /** Called with each job that was created but could not be tracked. */
  onTrackError?: (error: Error, name: string) => void;
  /** Where a tracking failure is logged (default: console). */
  logger?: Pick<Console, 'warn'>;
}

type Metadata = Record<string, unknown> | undefined;

/** What trackJobs needs of a client: a RatchetClient from @ratchet/client (this package does not depend on it). */
export interface JobTracker {
  track(name: string, options: { metadata?: Record<string, unknown>; credential?: string }): Promise<unknown>;
}
type Tracked = Pick<GoogleGenAI, 'batches' | 'models' | 'interactions'>;
/** The modules an older SDK may lack (2.x has no File Search stores); patched where present. */
type Optional = Partial<Pick<GoogleGenAI, 'fileSearchStores' | 'tunings'>>;

export function trackJobs<T extends Tracked>(ai: T, client: JobTracker, options: TrackJobsOptions = {}): T {
  const { onTrackError, logger = console } = options;
  const credential = options.credential ?? labelOfKey(ai, options.keys);
  const track = async (name: string | undefined, metadata: Metadata) => {
    if (!name) return;
    try {
      await client.track(name, { ...(metadata && { metadata }), ...(credential && { credential }) });
    } catch (error) {
      logger.warn(`ratchet: ${name} was created but could not be tracked: ${(error as Error).message}`);
      onTrackError?.(error as Error, name);
    }
  };

  /** `create` (its other arguments passed on), then the job it made tracked: its name and metadata read from the answer and the request. */
  const tracking =
    <P, R>(
      create: (params: P, ...rest: unknown[]) => Promise<R>,
      job: (answer: R, params: P) => { name?: string; metadata?: Metadata } | undefined,
    ) =>
    async (params: P, ...rest: unknown[]): Promise<R> => {
      const answer = await create(params, ...rest);
      const tracked = job(answer, params);
      if (tracked) await track(tracked.name, tracked.metadata);
      return answer;
    };

  const { batches, models } = ai;
  const interactions = ai.interactions; // a getter that creates its client once: patch that one
  batches.create = tracking(batches.create.bind(batches), (batch, params) => ({
    name: batch.name,
    metadata: params.config?.webhookConfig?.userMetadata,
  }));
  batches.createEmbeddings = tracking(batches.createEmbeddings.bind(batches), (batch) => ({ name: batch.name }));
  models.generateVideos = tracking(models.generateVideos.bind(models), (operation, params) => ({
    name: operation.name,
    metadata: params.config?.webhookConfig?.userMetadata,
  }));
  type InteractionParams = { background?: boolean; stream?: boolean; webhook_config?: { user_metadata?: Metadata } };
  const createInteraction = interactions.create.bind(interactions) as unknown as (
    params: InteractionParams,
    ...rest: unknown[]
  ) => Promise<{ id?: string }>;
  // On the Agent Platform an interaction lives in the client's project and location (fields the SDK keeps, typed private).
  const mode = ai as unknown as { vertexai?: boolean; project?: string; location?: string };
  const scope = mode.vertexai && mode.project && mode.location ? `projects/${mode.project}/locations/${mode.location}/` : '';
  const patched = tracking(createInteraction, (interaction, params) =>
    // Only a background interaction (not streamed) is a job that outlives the call.
    params.background && !params.stream && interaction.id
      ? { name: `${scope}interactions/${interaction.id}`, metadata: params.webhook_config?.user_metadata }
      : undefined,
  );
  interactions.create = patched as unknown as typeof interactions.create;

  // File Search: an import or an upload answers a long-running operation (`fileSearchStores/{s}/…operations/{o}`).
  const stores = (ai as Optional).fileSearchStores;
  if (stores?.importFile) stores.importFile = tracking(stores.importFile.bind(stores), (operation) => ({ name: operation.name }));
  if (stores?.uploadToFileSearchStore) {
    stores.uploadToFileSearchStore = tracking(stores.uploadToFileSearchStore.bind(stores), (operation) => ({ name: operation.name }));
  }
  // Tuning jobs are tracked where they are jobs of their own: on the Agent Platform (`…/tuningJobs/{id}`).
  const tunings = (ai as Optional).tunings;
  if (tunings?.tune && mode.vertexai) {
    tunings.tune = tracking(tunings.tune.bind(tunings), (job) => ({ name: job.name }));
  }
  return ai;
}

/** The label `keys` (`label=key,…`) gives the key this client was made with (a field the SDK keeps, typed private). */
function labelOfKey(ai: unknown, keys: string | undefined): string | undefined {
  const apiKey = (ai as { apiKey?: string }).apiKey;
  if (!keys || !apiKey) return undefined;
  return geminiKeysOf(keys)?.find((key) => key.apiKey === apiKey)?.label;
}
