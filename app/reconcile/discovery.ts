/**
 * Discovery: batches nobody told Ratchet about. A batch created by a script
 * that did not track it, whose webhook is lost, would never be polled and its
 * outcome would be lost. At most once an interval (an hour) reconcile lists
 * the key's batches, newest first, and adopts each one created within the
 * window that Ratchet does not know: the reducer makes its first record from
 * the listed state (a poll answer), written only if nothing is stored (one
 * conditional write); from then on it is polled like any open operation, and
 * its effects fire. A batch Ratchet knows is left to the poller. Paging stops at MAX_PAGES, at the first batch older than the
 * window, and at a next-page token that is empty or repeats (the SDK's own
 * pager would loop on those). With several keys (GEMINI_API_KEYS) each key's
 * batches are listed (a batch is visible only to the key that created it), and
 * an adopted batch records the label of the key that listed it, so it is
 * polled with that key; one key refused does not stop the others' sweep.
 * Each provider that lists its batches (providers/port.ts `listBatches`:
 * OpenAI's, Anthropic's, Gemini's through providers/gemini/events.ts
 * `geminiBatches`) is swept the same
 * way, by a discovery of its own.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { InvalidNameError, isNameOfKind } from '../../core/names.ts';
import { applyEvent, type OperationEvent } from '../../core/reducer.ts';
import { timeFromDate } from '../../core/time.ts';
import type { ProviderPoller } from '../../providers/port.ts';
import { type OperationStore, StoreRejectedError } from '../ports.ts';
import { AtMostEvery, type ClaimJob } from './at-most-every.ts';

export const DISCOVERY_INTERVAL_MS = 60 * 60_000;
/** After a failed sweep, the next try. */
export const DISCOVERY_RETRY_MS = 5 * 60_000;
/** Batches created longer ago than this are left alone: a first sweep does not replay a key's whole past. */
export const DISCOVERY_WINDOW_MS = 48 * 3_600_000;
export const DISCOVERY_MAX_PAGES = 10;
export const DISCOVERY_PAGE_SIZE = 50;

/** What discovery lists with: a provider's poller (providers/port.ts). */
export type BatchLister = Required<Pick<ProviderPoller, 'listBatches'>>;

export interface DiscoveryDeps {
  lister: BatchLister;
  /** The provider it sweeps, for its logs and its claim (default `gemini`). */
  provider?: string;
  store: OperationStore;
  logger: Logger;
  clock?: () => number;
  intervalMs?: number;
  maxPages?: number;
  pageSize?: number;
  /** Several instances: the sweep runs on the one that claims it. */
  claimJob?: ClaimJob;
  /** The labels of the keys to list with (GEMINI_API_KEYS); none: the one key. */
  credentials?: string[];
}

export interface SweepResult {
  /** Batches Ratchet did not know, now recorded. */
  adopted: number;
  /** Batches listed within the window (known ones included). */
  listed: number;
  pages: number;
}

/** What reconcile runs: a sweep when due. */
export interface Discovery {
  sweepIfDue(): Promise<SweepResult | undefined>;
}

export class BatchDiscovery implements Discovery {
  private readonly schedule: AtMostEvery;

  constructor(private readonly deps: DiscoveryDeps) {
    this.schedule = new AtMostEvery(
      deps.intervalMs ?? DISCOVERY_INTERVAL_MS,
      DISCOVERY_RETRY_MS,
      deps.clock,
      // Gemini's claim keeps its name; another provider's sweep is a chore of its own.
      deps.claimJob && {
        job: !deps.provider || deps.provider === 'gemini' ? 'discovery' : `discovery:${deps.provider}`,
        claimJob: deps.claimJob,
      },
    );
  }

  /** Sweeps if the last sweep is an interval old; undefined when it was not due or failed (logged, retried later, never thrown). */
  sweepIfDue(): Promise<SweepResult | undefined> {
    const { logger } = this.deps;
    return this.schedule.run(
      async (now) => {
        const result = await this.sweep(now);
        logger[result.adopted > 0 ? 'warn' : 'info']('batch discovery swept', { provider: this.deps.provider ?? 'gemini', ...result });
        return result;
      },
      (error) =>
        logger.warn('batch discovery failed; tried again later', { provider: this.deps.provider ?? 'gemini', detail: error.message }),
    );
  }

  private async sweep(now: number): Promise<SweepResult> {
    const labels = this.deps.credentials?.length ? this.deps.credentials : [undefined];
    const result: SweepResult = { adopted: 0, listed: 0, pages: 0 };
    let failure: Error | undefined;
    for (const credential of labels) {
      try {
        await this.sweepKey(now, credential, result);
      } catch (error) {
        // One key refused (or its list failing) leaves the others' batches to be found.
        failure = error as Error;
        if (labels.length > 1) this.deps.logger.warn('batch discovery failed for one key', { credential, detail: failure.message });
      }
    }
    if (failure && (labels.length === 1 || result.pages === 0)) throw failure;
    return result;
  }

  private async sweepKey(now: number, credential: string | undefined, result: SweepResult): Promise<void> {
    const { lister, store, logger, maxPages = DISCOVERY_MAX_PAGES, pageSize = DISCOVERY_PAGE_SIZE } = this.deps;
    let pages = 0;
    const seenTokens = new Set<string>();
    let pageToken: string | undefined;
    while (pages < maxPages) {
      const page = await lister.listBatches({ pageSize, ...(pageToken && { pageToken }), ...(credential && { credential }) });
      pages++;
      result.pages++;
      let older = false;
      for (const batch of page.batches) {
        if (batch.createTime && now - Date.parse(batch.createTime) > DISCOVERY_WINDOW_MS) {
          older = true;
          continue;
        }
        let event: OperationEvent;
        try {
          event = batch.event();
        } catch (error) {
          if (!batch.name || error instanceof InvalidNameError) continue;
          result.listed++;
          // A state with no mapping, a time that does not parse: never guessed.
          logger.warn('listed batch not adopted: its answer cannot be read', { operation: batch.name, detail: (error as Error).message });
          continue;
        }
        if (!isNameOfKind(event.name, event.kind)) continue;
        result.listed++;
        const first = applyEvent(undefined, event, timeFromDate(new Date(now)));
        if (!first.applied) continue;
        try {
          if (!(await store.write({ ...first.next, ...(credential && { credential }) }, undefined)).ok) continue;
        } catch (error) {
          // Refused for good (a value the store cannot hold): skip it, or it would stop every sweep. Unavailable: end the sweep.
          if (!(error instanceof StoreRejectedError)) throw error;
          logger.error('listed batch not adopted: the store refuses it', { operation: batch.name, detail: error.message });
          continue;
        }
        result.adopted++;
        logger.warn('batch adopted: it was never tracked and no webhook for it arrived', {
          operation: batch.name,
          state: event.state,
          ...(credential && { credential }),
        });
      }
      pageToken = page.nextPageToken || undefined; // "" is no next page
      if (older || !pageToken || seenTokens.has(pageToken)) break;
      seenTokens.add(pageToken);
    }
  }
}
