import type { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { batchGetAll } from '../../engines/dynamodb/batch-get.ts';

const TABLE = 'ratchet-operations';
const keysOf = (count: number) => Array.from({ length: count }, (_, i) => ({ name: `batches/${i}` }));

/** A table that leaves the last `unprocessed(request)` keys of a request unprocessed, as a throttled partition does. */
function throttled(unprocessed: (request: number) => number) {
  const requests: string[][] = [];
  const client = {
    send: async (command: BatchGetCommand) => {
      const keys = (command.input.RequestItems?.[TABLE]?.Keys ?? []) as Array<{ name: string }>;
      requests.push(keys.map((key) => key.name));
      const left = Math.min(keys.length, unprocessed(requests.length));
      const served = keys.slice(0, keys.length - left);
      return {
        Responses: { [TABLE]: served.map((key) => ({ ...key, state: 'RUNNING' })) },
        ...(left > 0 && { UnprocessedKeys: { [TABLE]: { Keys: keys.slice(keys.length - left) } } }),
      };
    },
  };
  return { client: client as never, requests };
}

describe('batchGetAll', () => {
  it('asks 100 keys a request and reads every item once', async () => {
    const { client, requests } = throttled(() => 0);
    const items = await batchGetAll(client, TABLE, keysOf(250));
    expect(requests.map((request) => request.length)).toEqual([100, 100, 50]);
    expect(items.map((item) => item.name).sort()).toEqual(
      keysOf(250)
        .map((key) => key.name)
        .sort(),
    );
  });

  it('asks the unprocessed keys again after a growing, jittered backoff, and only them', async () => {
    const { client, requests } = throttled((request) => [0, 60, 30, 10][request] ?? 0);
    const slept: number[] = [];
    const items = await batchGetAll(client, TABLE, keysOf(100), {
      sleep: async (ms) => {
        slept.push(ms);
      },
      random: () => 1,
    });
    expect(requests.map((request) => request.length)).toEqual([100, 60, 30, 10]);
    expect(new Set(requests.flat()).size).toBe(100);
    expect(items).toHaveLength(100);
    // Full jitter over 20 ms doubling (random() = 1 takes the whole span): 40, 80, 160 ms.
    expect(slept).toEqual([40, 80, 160]);
  });

  it('fails, naming what is left, once its attempts are spent: no endless loop on a throttled table', async () => {
    const { client, requests } = throttled((request) => (request === 1 ? 0 : 5));
    const slept: number[] = [];
    await expect(
      batchGetAll(client, TABLE, keysOf(110), {
        maxAttempts: 4,
        sleep: async (ms) => {
          slept.push(ms);
        },
        random: () => 0.5,
      }),
    ).rejects.toThrow('DynamoDB left 5 of 110 keys unread after 4 BatchGetItem requests (throttled)');
    expect(requests.map((request) => request.length)).toEqual([100, 10, 5, 5, 5]);
    expect(slept).toEqual([20, 40, 80]);
  });
});
