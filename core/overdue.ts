/**
 * Overdue jobs: a job Gemini still reports open (PENDING, RUNNING or
 * REQUIRES_ACTION) past its kind's limit, counted from when Ratchet first
 * knew it, is overdue. The most common complaint about Gemini
 * batches is one that stays PENDING or RUNNING for more than a day with no
 * error; Ratchet says so once per job, as an `operation.overdue` effect, and
 * lists it (`GET /operations?overdue=true`). Pure: the limits and the rule.
 *
 * The defaults follow Gemini's stated turnaround, with a margin:
 * - batches (both backends): 26 h (Gemini's target is 24 h; an unfinished one
 *   expires at 48 h);
 * - background interactions: 2 h (Deep Research states up to an hour);
 * - Veo videos: 30 min (minutes at peak);
 * - other long-running operations: 2 h; File Search imports and uploads: 1 h;
 * - Agent Platform tuning jobs: 12 h (minutes to hours by dataset size).
 */
import { isTerminal, OPERATION_KINDS, type OperationKind } from './lifecycle.ts';
import type { OperationRecord } from './reducer.ts';

/** Seconds a job of each kind may stay open; null: never overdue. */
export type OverdueLimits = Readonly<Record<OperationKind, number | null>>;

const HOUR = 3_600;

export const DEFAULT_OVERDUE_AFTER: OverdueLimits = {
  batch: 26 * HOUR,
  'platform-batch': 26 * HOUR,
  interaction: 2 * HOUR,
  'platform-interaction': 2 * HOUR,
  video: 30 * 60,
  'platform-video': 30 * 60,
  operation: 2 * HOUR,
  'file-search': HOUR,
  'platform-tuning': 12 * HOUR,
  // OpenAI's and Anthropic's batch window is 24 h; Bedrock's default job timeout 72 h.
  'openai-batch': 25 * HOUR,
  'azure-openai-batch': 25 * HOUR,
  'openai-response': 2 * HOUR,
  'openai-video': HOUR,
  'openai-fine-tuning': 24 * HOUR,
  'openai-eval-run': 6 * HOUR,
  'anthropic-batch': 25 * HOUR,
  'bedrock-batch': 73 * HOUR,
};

const UNITS: Readonly<Record<string, number>> = { s: 1, m: 60, h: HOUR, d: 24 * HOUR };

/** The names OVERDUE_AFTER takes: each kind, and each family (`batch` covers `platform-batch`, `tuning` `platform-tuning`). */
const FAMILY = (kind: OperationKind) => kind.replace(/^platform-/, '');
export const OVERDUE_NAMES: readonly string[] = [...new Set([...OPERATION_KINDS, ...OPERATION_KINDS.map(FAMILY)])];

/**
 * `batch=26h,interaction=2h,video=30m` (commas or spaces; units s, m, h, d;
 * `off`: never) over the defaults. A family name sets both backends' kinds,
 * unless a kind is named as well. Undefined when a pair is not one.
 */
export function overdueLimitsOf(value: string): OverdueLimits | undefined {
  const pairs = value.split(/[\s,]+/).filter(Boolean);
  const given = new Map<string, number | null>();
  for (const pair of pairs) {
    const match = /^([a-z-]+)=(?:(\d+(?:\.\d+)?)([smhd])|(off))$/.exec(pair);
    if (!match || !OVERDUE_NAMES.includes(match[1] as string) || given.has(match[1] as string)) return undefined;
    const seconds = match[4] ? null : Number(match[2]) * (UNITS[match[3] as string] as number);
    if (seconds !== null && !(seconds > 0)) return undefined;
    given.set(match[1] as string, seconds);
  }
  if (given.size === 0) return undefined;
  const limits = { ...DEFAULT_OVERDUE_AFTER };
  for (const kind of OPERATION_KINDS) {
    if (given.has(kind)) limits[kind] = given.get(kind) as number | null;
    else if (given.has(FAMILY(kind))) limits[kind] = given.get(FAMILY(kind)) as number | null;
  }
  return limits;
}

/**
 * When `record` became (or becomes) overdue; undefined for a job that never is: ended, its kind without a limit,
 * or never observed at Gemini (tracked, no state yet: reconcile's `not-found` and `expired-unseen` say more of it).
 */
export function overdueSince(record: Pick<OperationRecord, 'kind' | 'state' | 'createdAt'>, limits: OverdueLimits): string | undefined {
  const limit = limits[record.kind];
  if (limit === null || limit === undefined || record.state === null || isTerminal(record.state)) return undefined;
  return new Date(Date.parse(record.createdAt) + limit * 1000).toISOString();
}

/**
 * The write that marks `record` overdue at `now`: a version of its own (its
 * effect is `operation.overdue`, in order with the job's state changes), the
 * state and times unchanged. Undefined when it is not overdue yet, has ended,
 * or was marked already (once per job).
 */
export function overdueMark(record: OperationRecord, limits: OverdueLimits, now: string): OperationRecord | undefined {
  if (record.overdue) return undefined;
  const since = overdueSince(record, limits);
  if (!since || Date.parse(now) < Date.parse(since)) return undefined;
  return {
    ...record,
    version: record.version + 1,
    previousState: record.state,
    stateChanged: false,
    source: 'overdue',
    eventId: `overdue:${now}`,
    overdue: { at: now, afterSeconds: limits[record.kind] as number },
    recordedAt: now,
  };
}
