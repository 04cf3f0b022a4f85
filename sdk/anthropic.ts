/**
 * `ratchet/anthropic`: Anthropic Message Batches tracked the moment they are created.
 *
 *   const anthropic = trackJobs(new Anthropic(), new RatchetClient({ url }));
 *   const batch = await anthropic.messages.batches.create({ requests });   // tracked before this returns
 *
 * Returns the same `@anthropic-ai/sdk` client, `messages.batches.create` (and
 * `beta.messages.batches.create`, where the SDK has it) answering the same
 * `APIPromise` and tracking `anthropic/messages/batches/{id}` before it
 * returns. A batch has no metadata of its own, so none is recorded. A
 * tracking failure never hides the created batch: it is returned, the failure
 * goes to `onTrackError` and the log, and reconcile's discovery still finds it.
 */
import type { Anthropic } from '@anthropic-ai/sdk';
import { type JobTracker, type TrackJobsOptions, tracker, trackingCreate } from './tracking.ts';

export type { JobTracker, TrackJobsOptions };

type Tracked = { messages: Pick<Anthropic['messages'], 'batches'> };
type Batches = { create: (...args: never[]) => unknown };

export function trackJobs<T extends Tracked>(anthropic: T, client: JobTracker, options: TrackJobsOptions = {}): T {
  const track = tracker(client, options, (anthropic as { apiKey?: unknown }).apiKey);
  const beta = (anthropic as { beta?: { messages?: { batches?: Batches } } }).beta?.messages?.batches;
  for (const batches of [anthropic.messages.batches as unknown as Batches, beta]) {
    if (typeof batches?.create !== 'function') continue;
    batches.create = trackingCreate(
      batches.create.bind(batches),
      (batch: { id?: string }) => (batch?.id ? { name: `anthropic/messages/batches/${batch.id}` } : undefined),
      track,
    );
  }
  return anthropic;
}
