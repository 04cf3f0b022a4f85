/**
 * `ratchet/genai`: jobs tracked the moment they are created.
 *
 *   const ai = trackJobs(new GoogleGenAI({ apiKey }), new RatchetClient({ url }));
 *   const job = await ai.batches.create({ model, src });   // tracked before this returns
 *
 * Returns the same @google/genai client, with `batches.create`,
 * `batches.createEmbeddings`, `models.generateVideos` and background
 * `interactions.create` (not streamed) each tracking the job it created, with the request's webhook
 * `userMetadata` / `user_metadata` as the job's metadata. A tracking failure
 * never hides the created job: the job is returned, the failure goes to
 * `onTrackError` and the log, and reconcile's hourly discovery still finds a
 * batch; track a video or an interaction again yourself (`client.track`).
 */
import type { GoogleGenAI } from '@google/genai';
import type { RatchetClient } from './client.ts';

export interface TrackJobsOptions {
  /** Called with each job that was created but could not be tracked. */
  onTrackError?: (error: Error, name: string) => void;
  /** Where a tracking failure is logged (default: console). */
  logger?: Pick<Console, 'warn'>;
}

type Metadata = Record<string, unknown> | undefined;
type Tracked = Pick<GoogleGenAI, 'batches' | 'models' | 'interactions'>;

export function trackJobs<T extends Tracked>(ai: T, client: Pick<RatchetClient, 'track'>, options: TrackJobsOptions = {}): T {
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

  const { batches, models } = ai;
  const interactions = ai.interactions; // a getter that creates its client once: patch that one
  const createBatch = batches.create.bind(batches);
  batches.create = async (params) => {
    const job = await createBatch(params);
    await track(job.name, params.config?.webhookConfig?.userMetadata);
    return job;
  };
  const createEmbeddings = batches.createEmbeddings.bind(batches);
  batches.createEmbeddings = async (params) => {
    const job = await createEmbeddings(params);
    await track(job.name, undefined);
    return job;
  };
  const generateVideos = models.generateVideos.bind(models);
  models.generateVideos = async (params) => {
    const operation = await generateVideos(params);
    await track(operation.name, params.config?.webhookConfig?.userMetadata);
    return operation;
  };
  const createInteraction = interactions.create.bind(interactions) as (...args: unknown[]) => Promise<{ id?: string }>;
  const patched = async (
    params: { background?: boolean; stream?: boolean; webhook_config?: { user_metadata?: Metadata } },
    ...rest: unknown[]
  ) => {
    const interaction = await createInteraction(params, ...rest);
    if (params.background && !params.stream && interaction.id)
      await track(`interactions/${interaction.id}`, params.webhook_config?.user_metadata);
    return interaction;
  };
  interactions.create = patched as unknown as typeof interactions.create;
  return ai;
}
