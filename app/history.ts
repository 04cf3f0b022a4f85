/**
 * An operation's history: every applied write, in version order, built from
 * each engine's change log (never written on the ingest path, so a webhook
 * costs no more). One entry per `name` + `version`, so a change handed over
 * again writes the same entry and changes nothing. Entries expire after the
 * retention (`HISTORY_RETENTION_DAYS`). The port, in the domain's words; the
 * AWS edge (the table's stream) is stream-handler.ts.
 */
import type { HistoryEntry } from '../core/views.ts';

export type { HistoryEntry };

/** How long entries are kept unless HISTORY_RETENTION_DAYS says otherwise (every engine). */
export const DEFAULT_HISTORY_RETENTION_DAYS = 90;
/** At most this many entries in one answer: the newest are kept if an operation ever had more. */
export const MAX_HISTORY_ENTRIES = 1_000;

/** Where history is kept: a DynamoDB table in AWS, the embedded engine's file on one machine. */
export interface HistoryLog {
  /** Idempotent per `name` + `version`. */
  record(name: string, entry: HistoryEntry): Promise<void>;
  /** In version order, at most MAX_HISTORY_ENTRIES (the newest). */
  list(name: string): Promise<HistoryEntry[]>;
}

/** An entry from a stored item or record (the attributes history keeps, nothing else). */
export function entryOf(item: Record<string, unknown>): HistoryEntry {
  return {
    version: item.version as number,
    state: (item.state as HistoryEntry['state']) ?? null,
    previousState: (item.previousState as HistoryEntry['previousState']) ?? null,
    stateChanged: (item.stateChanged as boolean) ?? false,
    source: item.source as HistoryEntry['source'],
    eventId: (item.eventId as string | null) ?? null,
    updateTime: (item.updateTime as string | null) ?? null,
    recordedAt: item.recordedAt as string,
  };
}
