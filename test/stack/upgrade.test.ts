/**
 * Upgrading a deployed stack in place (lib/ratchet.ts, `keepPreviousOpenIndex`): DynamoDB adds or deletes one
 * index a table update and changes none, so each deploy of the upgrade may differ from the one before by one index
 * on each table, every index it keeps left exactly as it was; and reconcile reads the schedule index that is
 * certainly there. The stack before is written out here as it was deployed (1627b29, lib/ratchet.ts): its indexes.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { Ratchet, type RatchetProps } from '../../lib/ratchet.ts';

interface Index {
  IndexName: string;
  KeySchema: Array<{ AttributeName: string; KeyType: string }>;
  Projection: { ProjectionType: string; NonKeyAttributes?: string[] };
}

const keys = (hash: string, range: string) => [
  { AttributeName: hash, KeyType: 'HASH' },
  { AttributeName: range, KeyType: 'RANGE' },
];

/** The operations table's indexes as stacks before open-by-due-v2 were deployed; the history table had none. */
const BEFORE: Index[] = [
  { IndexName: 'open-by-due', KeySchema: keys('pollBucket', 'nextPollAt'), Projection: { ProjectionType: 'ALL' } },
  { IndexName: 'open-by-age', KeySchema: keys('ageBucket', 'createdAt'), Projection: { ProjectionType: 'KEYS_ONLY' } },
  { IndexName: 'recent-by-recorded', KeySchema: keys('listPartition', 'recordedAt'), Projection: { ProjectionType: 'ALL' } },
];

function synth(props: RatchetProps = {}) {
  const stack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'App', {
    env: { account: '123456789012', region: 'us-east-1' },
  });
  new Ratchet(stack, 'Ratchet', props);
  const template = Template.fromStack(stack);
  const indexesOf = (table: string): Index[] => {
    const [, resource] = Object.entries(template.findResources('AWS::DynamoDB::Table')).find(([id]) =>
      id.startsWith(`Ratchet${table}`),
    ) as [string, { Properties: { GlobalSecondaryIndexes?: Index[] } }];
    return resource.Properties.GlobalSecondaryIndexes ?? [];
  };
  const reconcile = Object.entries(template.findResources('AWS::Lambda::Function')).find(([id]) => id.startsWith('RatchetReconcile'))?.[1]
    .Properties.Environment.Variables as Record<string, unknown>;
  const queriedIndexes = Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((p) => p.Properties.Roles.some((r: { Ref: string }) => r.Ref.startsWith('RatchetReconcile')))
    .flatMap((p) => p.Properties.PolicyDocument.Statement)
    .filter((st: { Action: string | string[] }) => [st.Action].flat().includes('dynamodb:Query'))
    .map((st: { Resource: unknown }) => /\/index\/([a-z0-9-]+)"/.exec(JSON.stringify(st.Resource))?.[1])
    .sort();
  return { operations: indexesOf('Operations'), history: indexesOf('History'), reconcile, queriedIndexes };
}

/** What one table update does to the indexes: added and deleted names, and those kept but changed (DynamoDB refuses those). */
function change(from: Index[], to: Index[]) {
  const named = (list: Index[]) => new Map(list.map((index) => [index.IndexName, index]));
  const before = named(from);
  const after = named(to);
  return {
    added: [...after.keys()].filter((name) => !before.has(name)),
    deleted: [...before.keys()].filter((name) => !after.has(name)),
    changed: [...after.keys()].filter((name) => before.has(name) && JSON.stringify(before.get(name)) !== JSON.stringify(after.get(name))),
  };
}

describe('upgrading a stack deployed before open-by-due-v2', () => {
  const upgrading = synth({ keepPreviousOpenIndex: true });
  const upgraded = synth();

  it('first deploy: adds open-by-due-v2 beside the indexes as they were, and recent-operations to the history table; changes none', () => {
    expect(change(BEFORE, upgrading.operations)).toEqual({ added: ['open-by-due-v2'], deleted: [], changed: [] });
    expect(change([], upgrading.history)).toEqual({ added: ['recent-operations'], deleted: [], changed: [] });
  });

  it('second deploy, without the prop: deletes open-by-due alone', () => {
    expect(change(upgrading.operations, upgraded.operations)).toEqual({ added: [], deleted: ['open-by-due'], changed: [] });
    expect(change(upgrading.history, upgraded.history)).toEqual({ added: [], deleted: [], changed: [] });
  });

  it('a new stack straight away has only the lean schedule index (and is the same as the upgraded one)', () => {
    expect(upgraded.operations.map((index) => index.IndexName)).toEqual(['open-by-due-v2', 'open-by-age', 'recent-by-recorded']);
    expect(upgraded.operations.find((index) => index.IndexName === 'open-by-due-v2')?.Projection).toEqual({
      ProjectionType: 'INCLUDE',
      NonKeyAttributes: ['kind', 'credential'],
    });
  });

  it('reconcile reads the old index while it upgrades (the new one may still be filling), and may query that one only', () => {
    expect(upgrading.reconcile.OPEN_INDEX_NAME).toBe('open-by-due');
    expect(upgrading.queriedIndexes).toEqual(['open-by-age', 'open-by-due']);
    expect(upgraded.reconcile.OPEN_INDEX_NAME).toBeUndefined();
    expect(upgraded.queriedIndexes).toEqual(['open-by-age', 'open-by-due-v2']);
  });
});
