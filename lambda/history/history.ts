/**
 * An operation's history: every applied write, in version order, built from
 * the table's stream (never written on the ingest path, so a webhook costs no
 * more). One item per `name` + `version`, so a redelivered stream record
 * writes the same item again and changes nothing. Items expire after the
 * retention (`HISTORY_RETENTION_DAYS`, DynamoDB TTL on `expiresAt`).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';

export type { HistoryEntry } from '../core/views.ts';

import type { HistoryEntry } from '../core/views.ts';

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

/**
 * The stream handler (a Lambda event source mapping in AWS, the local stream
 * mapping here): each record's NewImage as a history entry. A record that
 * cannot be read as one is skipped and logged, never retried for ever; a
 * store failure fails that record and the ones after it (retried in order).
 */
export function createHistoryHandler(deps: {
  history: Pick<HistoryLog, 'record'>;
  logger: Pick<Logger, 'warn'>;
}): (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse> {
  return async (event) => {
    for (const [i, record] of event.Records.entries()) {
      const entry = decode(record);
      if (!entry) {
        deps.logger.warn('history: stream record skipped, not an operation write', { eventID: record.eventID });
        continue;
      }
      try {
        await deps.history.record(entry.name, entry.entry);
      } catch {
        return { batchItemFailures: event.Records.slice(i).map((r) => ({ itemIdentifier: r.dynamodb?.SequenceNumber ?? '' })) };
      }
    }
    return { batchItemFailures: [] };
  };
}

function decode(record: DynamoDBRecord): { name: string; entry: HistoryEntry } | undefined {
  try {
    // Only the attributes an entry needs: the rest of the image (results, metadata) is none of history's business.
    const raw = record.dynamodb?.NewImage ?? {};
    const wanted = ['name', 'version', 'state', 'previousState', 'stateChanged', 'source', 'eventId', 'updateTime', 'recordedAt'];
    const image = unmarshall(Object.fromEntries(Object.entries(raw).filter(([key]) => wanted.includes(key))) as never) as Record<
      string,
      unknown
    >;
    if (typeof image.name !== 'string' || typeof image.version !== 'number' || typeof image.recordedAt !== 'string') return undefined;
    return { name: image.name, entry: entryOf(image) };
  } catch {
    return undefined;
  }
}
