/**
 * The history function's edge in AWS: the operations table's stream records
 * (filtered by the event source mapping to applied writes) decoded into
 * history entries, and into each operation's latest item, the read model
 * `GET /operations` lists (engines/dynamodb/tables.ts).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { DynamoDBBatchResponse, DynamoDBRecord, DynamoDBStreamEvent } from 'aws-lambda';
import { entryOf, type HistoryLog } from '../../app/history.ts';
import type { HistoryEntry } from '../../core/views.ts';
import { type DynamoDbHistory, type Listing, listingOf, newImageOf } from '../../engines/dynamodb/index.ts';

/**
 * The stream handler (a Lambda event source mapping in AWS, the local stream
 * mapping here): each record's NewImage as a history entry, then as the
 * operation's latest item (both idempotent, so a retried batch is harmless),
 * the batch's records at once. A record that cannot be read as one is
 * skipped and logged, never retried for ever; a store failure fails that
 * record and the ones after it (retried in order).
 */
export function createHistoryHandler(deps: {
  history: Pick<HistoryLog, 'record'> & Pick<DynamoDbHistory, 'keepLatest'>;
  logger: Pick<Logger, 'warn'>;
}): (event: DynamoDBStreamEvent) => Promise<DynamoDBBatchResponse> {
  return async (event) => {
    // A batch's records written at once (each write is idempotent, and the latest item takes only a newer version,
    // so their order does not matter): the first that failed and every one after it are retried.
    const written = await Promise.all(
      event.Records.map(async (record) => {
        const entry = decode(record);
        if (!entry) {
          deps.logger.warn('history: stream record skipped, not an operation write', { eventID: record.eventID });
          return true;
        }
        try {
          await deps.history.record(entry.name, entry.entry);
          await deps.history.keepLatest(entry.listing);
          return true;
        } catch {
          return false;
        }
      }),
    );
    const failed = written.indexOf(false);
    if (failed < 0) return { batchItemFailures: [] };
    return { batchItemFailures: event.Records.slice(failed).map((r) => ({ itemIdentifier: r.dynamodb?.SequenceNumber ?? '' })) };
  };
}

function decode(record: DynamoDBRecord): { name: string; entry: HistoryEntry; listing: Listing } | undefined {
  try {
    // Only the attributes an entry and the list need: the rest of the image (results, metadata) is none of history's business.
    const wanted = [
      'name',
      'version',
      'state',
      'previousState',
      'stateChanged',
      'source',
      'eventId',
      'updateTime',
      'recordedAt',
      'kind',
      'overdue',
    ];
    const image = newImageOf(record, wanted) ?? {};
    const listing = listingOf(image);
    return listing && { name: listing.name, entry: entryOf(image), listing };
  } catch {
    return undefined;
  }
}
