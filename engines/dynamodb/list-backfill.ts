/**
 * The list's read model filled in from the operations table, for a stack
 * deployed before `GET /operations` read it from the history table
 * (`ratchet-aws backfill-list`, lib/cli/backfill-list.ts): until then only an
 * operation's next write would put its latest item there. Safe beside the
 * running history function, and to run again: a latest item is replaced only
 * by a newer version.
 */
import { type DynamoDBDocumentClient, ScanCommand, type ScanCommandOutput } from '@aws-sdk/lib-dynamodb';
import { type DynamoDbHistory, listingOf } from './history.ts';

/** Writes the latest item of every operation in `tableName` (one scan, a page at a time); how many it saw. */
export async function backfillList(documents: DynamoDBDocumentClient, tableName: string, history: DynamoDbHistory): Promise<number> {
  let operations = 0;
  let start: Record<string, unknown> | undefined;
  do {
    const page: ScanCommandOutput = await documents.send(
      new ScanCommand({
        TableName: tableName,
        // What a listing reads; the receipt and the unprocessable deliveries have no version and are passed over.
        ProjectionExpression: '#name, version, kind, #state, recordedAt, overdue',
        ExpressionAttributeNames: { '#name': 'name', '#state': 'state' },
        ...(start && { ExclusiveStartKey: start }),
      }),
    );
    const listings = (page.Items ?? []).flatMap((item) => listingOf(item) ?? []);
    await Promise.all(listings.map((listing) => history.keepLatest(listing)));
    operations += listings.length;
    start = page.LastEvaluatedKey;
  } while (start);
  return operations;
}
