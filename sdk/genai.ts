/**
 * `ratchet/genai`: jobs tracked the moment they are created.
 *
 *   const ai = trackJobs(new GoogleGenAI({ apiKey }), new RatchetClient({ url }));
 *   const job = await ai.batches.create({ model, src });   // tracked before this returns
 *
 * Returns the same @google/genai client (2.x or 3.x, on the Gemini API or in
 * Agent Platform mode), with `batches.create`, `batches.createEmbeddings`,
 * `models.generateVideos` and background `interactions.create` (not
 * streamed) each tracking the job it created, with the request's webhook
 * `userMetadata` / `user_metadata` as the job's metadata. Video on the Gemini
 * API is a background interaction now (`gemini-omni-*`); `generateVideos`
 * (Veo) runs where the SDK sends it, the Agent Platform, and SDK 3.x throws
 * it on the Gemini API before any request, untracked. A tracking failure
 * never hides the created job: the job is returned, the failure goes to
 * `onTrackError` and the log, and reconcile's hourly discovery still finds a
 * batch; track a video or an interaction again yourself (`client.track`).
 */
import type { GoogleGenAI } from '@google/genai';

export interface TrackJobsOptions {
  /** Called with each job that was created but could not be tracked. */
  onTrackError?: (error: Error, name: string) => void;
  /** Where a tracking failure is logged (default: console). */
  logger?: Pick<Console, 'warn'>;
}

type Metadata = Record<string, unknown> | undefined;

/** What trackJobs needs of a client: a RatchetClient from @ratchet/client (this package does not depend on it). */
export interface JobTracker {
  track(name: string, options: { metadata?: Record<string, unknown> }): Promise<unknown>;
}
type Tracked = Pick<GoogleGenAI, 'batches' | 'models' | 'interactions'>;

export function trackJobs<T extends Tracked>(ai: T, client: JobTracker, options: TrackJobsOptions = {}): T {
  const { onTrackError, logger = console } = options;
  const track = async (name: string | undefined, metadata: Metadata) => {
    if (!name) return;
    try {
      await client.track(name, metadata ? { metadata } : {});
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
  return ai;
}
