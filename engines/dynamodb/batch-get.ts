/**
 * BatchGetItem to the end: the keys DynamoDB leaves unprocessed (a
 * partition's read capacity spent, the response's 16 MB) are asked again
 * after an exponential backoff with full jitter, as AWS advises, and a batch
 * still unfinished after `maxAttempts` fails (a list route answers it 503:
 * the store busy, retry later), rather than spinning on a throttled table.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { BatchGetCommand, type BatchGetCommandOutput, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

export interface BatchGetOptions {
  /** Requests for one batch of keys at most, the first included (default 8: about 2.5 s of backoff at most). */
  maxAttempts?: number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

/** BatchGetItem takes 100 keys a request. */
const KEYS_PER_REQUEST = 100;
const BACKOFF_BASE_MS = 20;
const BACKOFF_CAP_MS = 1_000;

/** The items found for `keys` (in no particular order; a key with no item is left out). */
export async function batchGetAll(
  client: Pick<DynamoDBDocumentClient, 'send'>,
  tableName: string,
  keys: ReadonlyArray<Record<string, unknown>>,
  options: BatchGetOptions = {},
): Promise<Array<Record<string, unknown>>> {
  const { maxAttempts = 8, sleep = (ms: number) => delay(ms), random = Math.random } = options;
  const items: Array<Record<string, unknown>> = [];
  for (let i = 0; i < keys.length; i += KEYS_PER_REQUEST) {
    let left: ReadonlyArray<Record<string, unknown>> = keys.slice(i, i + KEYS_PER_REQUEST);
    for (let attempt = 1; left.length > 0; attempt++) {
      if (attempt > maxAttempts)
        throw new Error(
          `DynamoDB left ${left.length} of ${keys.length} keys unread after ${maxAttempts} BatchGetItem requests (throttled)`,
        );
      if (attempt > 1) await sleep(random() * Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** (attempt - 1)));
      const answer = (await client.send(
        new BatchGetCommand({ RequestItems: { [tableName]: { Keys: [...left] } } }),
      )) as BatchGetCommandOutput;
      items.push(...(answer.Responses?.[tableName] ?? []));
      left = answer.UnprocessedKeys?.[tableName]?.Keys ?? [];
    }
  }
  return items;
}
