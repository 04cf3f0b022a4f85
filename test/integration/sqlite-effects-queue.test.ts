/**
 * The embedded engine's effects queue on a real SQLite file, in the domain's
 * words: the outbox's state changes become pending effects handed to the
 * application's delivery, each operation in version order while another's
 * backoff holds nothing up; an effect queued by Ratchet 0.1 (a DynamoDB
 * stream record, schema version 3) is still delivered after the upgrade; one
 * that cannot be read is set aside raw.
 */
import { marshall } from '@aws-sdk/util-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import type { PendingEffect } from '../../app/effects/deliver.ts';
import { type OperationRecord, trackedRecord } from '../../core/reducer.ts';
import { SqliteEffectsQueue } from '../../engines/sqlite/effects-queue.ts';
import type { Change } from '../../engines/sqlite/outbox.ts';
import { MIGRATIONS, migrate } from '../../engines/sqlite/schema.ts';
import { Sqlite } from '../../engines/sqlite/sqlite.ts';
import { eventually } from '../support/receiver.ts';
import { silentLogger } from '../support/silent-logger.ts';

const NOW = '2026-12-06T00:00:00.000000000Z';
const record = (name: string, version: number, state: OperationRecord['state']): OperationRecord => ({
  ...trackedRecord(name, 'batch', NOW),
  state,
  version,
  stateChanged: true,
  source: 'webhook',
});
const change = (seq: number, r: OperationRecord): Change => ({
  seq,
  name: r.name,
  version: r.version,
  writeKind: 'state-change',
  oldRecord: null,
  newRecord: JSON.stringify(r),
  at: Date.now(),
});

let queue: SqliteEffectsQueue | undefined;
afterEach(async () => {
  await queue?.stop();
  queue = undefined;
});

function open(db: Sqlite, undecodable: unknown[] = []) {
  return new SqliteEffectsQueue(db, {
    logger: silentLogger,
    parkUndecodable: async (entry, reason) => void undecodable.push({ ...entry, reason }),
  });
}

describe('the SQLite effects queue', () => {
  it('hands each state change to delivery as a pending effect, in version order per operation; a backoff holds only its operation', async () => {
    const db = Sqlite.open(':memory:');
    migrate(db);
    queue = open(db);
    const seen: string[] = [];
    let refusals = 0;
    queue.start(async (effect: PendingEffect) => {
      const { name, version } = effect.transition;
      if (name === 'batches/slow' && refusals++ < 2) return { kind: 'retry', inMs: 50, lastError: 'answered 503 Service Unavailable' };
      seen.push(`${name}#${version} attempt ${effect.attempt}${effect.earlierFailure ? ` after ${effect.earlierFailure}` : ''}`);
      return { kind: 'done' };
    });
    db.write(() =>
      queue?.take([
        change(1, record('batches/slow', 1, 'RUNNING')),
        change(2, record('batches/fast', 1, 'RUNNING')),
        change(3, record('batches/slow', 2, 'SUCCEEDED')),
        change(4, record('batches/fast', 2, 'SUCCEEDED')),
      ]),
    );
    queue.taken();
    await eventually(() => seen.length === 4, 5_000, 'every effect');
    expect(seen.filter((s) => s.startsWith('batches/fast'))).toEqual(['batches/fast#1 attempt 1', 'batches/fast#2 attempt 1']);
    expect(seen.filter((s) => s.startsWith('batches/slow'))).toEqual([
      'batches/slow#1 attempt 3 after answered 503 Service Unavailable',
      'batches/slow#2 attempt 1',
    ]);
    // The fast one did not wait for the slow one's backoff.
    expect(seen.indexOf('batches/fast#2 attempt 1')).toBeLessThan(
      seen.indexOf('batches/slow#1 attempt 3 after answered 503 Service Unavailable'),
    );
    // Each row goes just after its delivery answers done.
    await eventually(() => db.all('SELECT * FROM effect_messages').length === 0, 5_000, 'the queue emptied');
  });

  it("delivers an effect Ratchet 0.1 queued as a DynamoDB stream record, after the file's upgrade; sets aside one nothing can read", async () => {
    const db = Sqlite.open(':memory:');
    migrate(db, MIGRATIONS.slice(0, 3));
    const old = record('batches/queued-by-0.1', 2, 'SUCCEEDED');
    const streamRecord = {
      eventID: '7',
      eventName: 'MODIFY',
      dynamodb: {
        Keys: { name: { S: old.name } },
        NewImage: marshall({ ...old, writeKind: 'state-change' }, { removeUndefinedValues: true }),
        SequenceNumber: '7',
      },
    };
    db.write(() => {
      db.run('INSERT INTO effect_messages (grp, body) VALUES (?, ?)', 'a-hash-of-the-name', JSON.stringify(streamRecord));
      db.run(
        'INSERT INTO effect_messages (grp, body) VALUES (?, ?)',
        'another',
        '{"dynamodb":{"NewImage":{"name":{"S":"x"},"version":{"X":"?"}}}}',
      );
    });
    migrate(db);
    const undecodable: unknown[] = [];
    queue = open(db, undecodable);
    const delivered: PendingEffect[] = [];
    queue.start(async (effect) => {
      delivered.push(effect);
      return { kind: 'done' };
    });
    await eventually(() => delivered.length === 1 && undecodable.length === 1, 5_000, 'the old effects');
    expect(delivered[0]?.transition).toEqual({
      name: old.name,
      kind: 'batch',
      provider: 'gemini',
      state: 'SUCCEEDED',
      previousState: null,
      version: 2,
      updateTime: null,
      providerState: null,
      result: null,
      recordedAt: NOW,
    });
    expect(undecodable).toEqual([expect.objectContaining({ reason: expect.stringContaining('a type Ratchet never wrote') })]);
  });
});
