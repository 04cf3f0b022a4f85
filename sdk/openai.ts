/**
 * `ratchet/openai`: OpenAI jobs tracked the moment they are created.
 *
 *   const openai = trackJobs(new OpenAI(), new RatchetClient({ url }));
 *   const batch = await openai.batches.create({ input_file_id, endpoint, completion_window: '24h' });   // tracked
 *
 * Returns the same `openai` client (5.x or 6.x), its creates answering the
 * same `APIPromise` (`.withResponse()`, `_request_id`), each tracking the job
 * it created before it returns, with the request's `metadata` as the job's:
 *
 * - `batches.create`: `openai/batches/{id}`
 * - `responses.create` with `background: true`, not streamed: `openai/responses/{id}`
 *   (a foreground or streamed response is no job, and is not tracked)
 * - `videos.create`, and `remix`, `edit`, `extend`, which make a new video (where the SDK has them):
 *   `openai/videos/{id}`
 * - `fineTuning.jobs.create`: `openai/fine_tuning/jobs/{id}`
 * - `evals.runs.create(evalId, …)`: `openai/evals/{eval_id}/runs/{id}`
 *
 * On Azure (an `AzureOpenAI` client, or any client whose base URL is
 * `https://{resource}.openai.azure.com/…`) only batches are jobs Ratchet
 * knows: `batches.create` tracks `azure-openai/{resource}/batches/{id}`, and
 * nothing else is tracked. A client whose platform cannot be named (an
 * `AzureOpenAI` on another host, Bedrock's OpenAI-compatible endpoint) is
 * returned as it is, tracking nothing, with one warning.
 *
 * A tracking failure never hides the created job: the job is returned, the
 * failure goes to `onTrackError` and the log, and reconcile's discovery still
 * finds a batch; track the others again yourself (`client.track`).
 */
import type { OpenAI } from 'openai';
import { type CreatedJob, type JobTracker, type Metadata, type TrackJobsOptions, tracker, trackingCreate } from './tracking.ts';

export type { JobTracker, TrackJobsOptions };

type Tracked = Pick<OpenAI, 'batches' | 'responses' | 'fineTuning' | 'evals'>;

/** A create as trackJobs sees it: whatever it is given, passed on. */
type Create = (...args: never[]) => unknown;
/** The video creates the SDK may have (5.x has no videos; `edit` and `extend` came later than `create`). */
const VIDEO_CREATES = ['create', 'remix', 'edit', 'extend'] as const;

export function trackJobs<T extends Tracked>(openai: T, client: JobTracker, options: TrackJobsOptions = {}): T {
  const { apiKey, baseURL } = openai as unknown as { apiKey?: unknown; baseURL?: string };
  const track = tracker(client, options, apiKey);
  const platform = platformOf(openai, baseURL);
  if (platform.untracked) {
    (options.logger ?? console).warn(`ratchet: trackJobs tracks nothing on ${baseURL}: ${platform.untracked}`);
    return openai;
  }
  const patch = <R extends object>(
    resource: R,
    method: keyof R & string,
    job: (answer: never, args: never[]) => CreatedJob | undefined,
  ) => {
    const create = resource[method] as unknown as Create;
    (resource as Record<string, unknown>)[method] = trackingCreate(create.bind(resource), job, track);
  };
  const metadataOf = (params: unknown): Metadata => (params as { metadata?: Metadata } | undefined)?.metadata;
  const named =
    (prefix: string) =>
    (answer: { id?: string }, [params]: unknown[]) =>
      answer?.id ? { name: `${prefix}/${answer.id}`, metadata: metadataOf(params) } : undefined;

  if (platform.azureResource) {
    patch(openai.batches, 'create', named(`azure-openai/${platform.azureResource}/batches`));
    return openai;
  }
  patch(openai.batches, 'create', named('openai/batches'));
  patch(openai.fineTuning.jobs, 'create', named('openai/fine_tuning/jobs'));
  patch(openai.evals.runs, 'create', (run: { id?: string; eval_id?: string }, [evalId, params]: unknown[]) =>
    run?.id ? { name: `openai/evals/${run.eval_id ?? evalId}/runs/${run.id}`, metadata: metadataOf(params) } : undefined,
  );
  const videos = (openai as { videos?: Partial<Record<(typeof VIDEO_CREATES)[number], Create>> }).videos;
  for (const method of VIDEO_CREATES) if (videos && typeof videos[method] === 'function') patch(videos, method, named('openai/videos'));

  // Only a background response (not streamed) is a job that outlives the call; any other passes untouched.
  const { responses } = openai;
  const createResponse = responses.create.bind(responses) as unknown as (params: unknown, ...rest: unknown[]) => unknown;
  const createBackground = trackingCreate(createResponse, named('openai/responses'), track);
  responses.create = ((params: { background?: boolean | null; stream?: boolean | null }, ...rest: unknown[]) =>
    params?.background && !params.stream ? createBackground(params, ...rest) : createResponse(params, ...rest)) as typeof responses.create;
  return openai;
}

/** Where the client's jobs live: OpenAI's API (or a proxy of it), an Azure resource, or somewhere Ratchet cannot name. */
function platformOf(openai: unknown, baseURL: string | undefined): { azureResource?: string; untracked?: string } {
  let host = '';
  try {
    host = new URL(baseURL ?? '').hostname;
  } catch {
    // No base URL to read: OpenAI's own (the SDK always has one; a stand-in may not).
  }
  const azureResource = /^([a-z0-9][a-z0-9-]*)\.openai\.azure\.com$/.exec(host)?.[1];
  if (azureResource) return { azureResource };
  // AzureOpenAI keeps its api-version; its resource is the host's first label only on openai.azure.com.
  if (typeof (openai as { apiVersion?: unknown }).apiVersion === 'string')
    return { untracked: 'an Azure client whose resource is not https://{resource}.openai.azure.com' };
  if (/^bedrock-mantle\./.test(host)) return { untracked: "Bedrock's OpenAI-compatible endpoint, whose jobs Ratchet does not poll" };
  return {};
}
