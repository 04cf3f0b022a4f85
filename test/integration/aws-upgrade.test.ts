/**
 * The upgrading deploy's schedule on moto: a table made as stacks before open-by-due-v2 had it (`open-by-due`,
 * every attribute projected) takes the new index beside the old one as CloudFormation's update does (UpdateTable,
 * one index created), and reconcile, reading the old one meanwhile (OPEN_INDEX_NAME) and the new one after, finds
 * the same due jobs with what it groups them by, those written before the new index and those written after.
 */
import { afterAll, describe, expect, inject, it } from 'vitest';
import { trackedRecord } from '../../core/reducer.ts';
import { createTableInput, openDynamoDb, operationsTable } from '../../engines/dynamodb/index.ts';
import { OPEN_INDEX, POLL_BUCKETS, PREVIOUS_OPEN_INDEX } from '../../engines/dynamodb/tables.ts';
import { ensureTable } from '../support/aws/tables.ts';

const endpoint = inject('dynamodbEndpoint');
const tableName = `ratchet-upgrade-${Date.now().toString(36)}`;
const upgrading = openDynamoDb({ endpoint, tables: { operations: operationsTable(tableName, undefined, PREVIOUS_OPEN_INDEX) } });
const upgraded = openDynamoDb({ endpoint, tables: { operations: operationsTable(tableName) } });
afterAll(() => {
  upgrading.client.destroy();
  upgraded.client.destroy();
});

/** The table as the stack describes it now, its schedule index as it was before open-by-due-v2. */
function tableBefore() {
  const input = createTableInput(tableName);
  return {
    ...input,
    GlobalSecondaryIndexes: (input.GlobalSecondaryIndexes ?? []).map((index) =>
      index.IndexName === OPEN_INDEX ? { ...index, IndexName: PREVIOUS_OPEN_INDEX, Projection: { ProjectionType: 'ALL' as const } } : index,
    ),
  };
}

const due = async (store: typeof upgraded.operations) => {
  const pages = await Promise.all(Array.from({ length: POLL_BUCKETS }, (_, bucket) => store.dueJobs(bucket, '9999', 1_000)));
  return pages
    .flatMap((page) => page.jobs)
    .map(({ name, kind, credential }) => ({ name, kind, credential }))
    .sort((a, b) => (a.name < b.name ? -1 : 1));
};

describe('the schedule index across the upgrade', () => {
  it('is read from open-by-due while the stack upgrades and from open-by-due-v2 after: the same jobs, kind and key', async () => {
    await ensureTable(upgraded.client, tableBefore());
    const now = '2026-12-07T10:00:00.000000000Z';
    await upgrading.operations.write(trackedRecord('batches/before-upgrade', 'batch', now, undefined, 'key-a'), undefined);
    // Before the deploy there is no open-by-due-v2 to read: the upgrading reader's index is the old one.
    expect(await due(upgrading.operations)).toEqual([{ name: 'batches/before-upgrade', kind: 'batch', credential: 'key-a' }]);
    await expect(due(upgraded.operations)).rejects.toThrow();
    // The first deploy: UpdateTable adds open-by-due-v2 (the one index this update creates).
    await ensureTable(upgraded.client, createTableInput(tableName));
    await upgrading.operations.write(trackedRecord('batches/during-upgrade', 'video', now, undefined, 'key-b'), undefined);
    const expected = [
      { name: 'batches/before-upgrade', kind: 'batch', credential: 'key-a' },
      { name: 'batches/during-upgrade', kind: 'video', credential: 'key-b' },
    ];
    expect(await due(upgrading.operations)).toEqual(expected);
    expect(await due(upgraded.operations)).toEqual(expected);
  });
});
