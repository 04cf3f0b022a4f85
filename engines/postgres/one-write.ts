/**
 * Writes to operations in one statement (one round trip, its own
 * transaction; under load, many operations' at once): for each operation the
 * compare-and-set of its row on the version the reducer read, and with it
 * every row that goes with the change (change log, history, effect) and the
 * events' decisions; or, where the compare-and-set fails, nothing of that
 * operation's and its stored record back, so the caller reduces again
 * without another read. No row lock outlives the statement.
 *
 * How one statement stays exact (READ COMMITTED):
 * - `held` locks the rows (`FOR UPDATE`, in name order); a row another
 *   transaction changed after this statement's snapshot is waited for and
 *   read at its newest version, so `current` is the winner of a lost race,
 *   not the snapshot's.
 * - `moved` updates only at the version reduced against (PostgreSQL rechecks
 *   `version` on the newest row); `born` inserts only where nothing is
 *   stored (a racing insert makes it do nothing).
 * - An operation's other rows are written only if one of those two
 *   returned it.
 * - An operation whose events were all discarded (no new version) has its
 *   decisions written if its row is still at that version (`noted`).
 * - A poll's next time and counters go in the same update (or, for a poll
 *   that changed nothing, an update of those columns alone at that version):
 *   a poll's outcome and its schedule are one statement.
 * - `named` sets the transaction's `application_name` before anything can
 *   give it a transaction id (the lock and the insert wait for it): the
 *   change feed's horizon waits for it, whatever the pool's own name
 *   (change-log.ts).
 */
import { transitionOf } from '../../app/effects/transition.ts';
import { entryOf } from '../../app/history.ts';
import type { Decision } from '../../app/ports.ts';
import { sendsEffect, writeKindOf } from '../../core/change.ts';
import { isTerminal } from '../../core/lifecycle.ts';
import { storeAway } from '../../core/network.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import { DECISIONS_KEPT } from '../sql/rows.ts';
import { FEED_WRITER, type Postgres, unanswered } from './database.ts';

/** What a statement writes for one operation. */
export interface OneWrite {
  name: string;
  /** The version the batch was reduced against (undefined: nothing stored). */
  expected: number | undefined;
  /** Each new version, ascending (the last is what the row becomes); none: every event was discarded. */
  versions: OperationRecord[];
  /** Every event's decision, in order. */
  decisions: Decision[];
  /** A poll's next time and counters, written while the job is still polled (reconcile's schedulePoll, folded in). */
  poll?: { nextPollAt: string; unchangedPolls: number };
  /** Per version, the traceparent of the write's span that made it (OpenTelemetry on), kept with its effect. */
  traces?: Array<string | undefined>;
}

export type OneWriteOutcome = { ok: true } | { ok: false; current: OperationRecord | undefined };

/**
 * Every write of a batch, in one statement; each operation at most once.
 * Rows are locked in name order and new ones inserted in name order, so two
 * instances' batches never wait on each other in a cycle.
 */
const WRITE = `WITH named AS MATERIALIZED (SELECT set_config('application_name', '${FEED_WRITER}', true) AS n),
input AS (
  SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::int[], $6::text[], $7::text[], $8::text[], $9::text[],
      $10::text[], $11::int[], $12::text[])
    AS i(name, expected, kind, state, version, recorded_at, record, open_at, created_at, poll_at, poll_unchanged, overdue_at)),
held AS (
  SELECT name, version, record FROM {s}.operations WHERE name = ANY($1::text[]) AND (SELECT n FROM named) IS NOT NULL
  ORDER BY name FOR UPDATE),
moved AS (
  UPDATE {s}.operations o SET kind = i.kind, state = i.state, version = i.version, recorded_at = i.recorded_at, record = i.record, overdue_at = i.overdue_at,
    next_poll_at = CASE WHEN i.open_at IS NULL THEN NULL
      -- The write that marks it overdue leaves its schedule as it was (a job whose polling stopped stays stopped).
      WHEN o.overdue_at IS NULL AND i.overdue_at IS NOT NULL THEN o.next_poll_at
      WHEN i.poll_at IS NOT NULL AND o.next_poll_at IS NOT NULL THEN i.poll_at ELSE coalesce(o.next_poll_at, i.open_at) END,
    unchanged_polls = CASE WHEN i.poll_at IS NULL THEN o.unchanged_polls ELSE i.poll_unchanged END,
    failed_polls = CASE WHEN i.poll_at IS NULL THEN o.failed_polls ELSE 0 END,
    not_found_polls = CASE WHEN i.poll_at IS NULL THEN o.not_found_polls ELSE 0 END,
    poll_note = CASE WHEN i.poll_at IS NULL THEN o.poll_note END,
    change_key = greatest(pg_current_xact_id(), o.change_key)
  FROM input i JOIN held h ON h.name = i.name
  WHERE o.name = i.name AND i.version IS NOT NULL AND o.version = i.expected AND h.version = i.expected
  RETURNING o.name, o.change_key),
born AS (
  INSERT INTO {s}.operations (name, kind, state, version, recorded_at, record, next_poll_at, created_at, overdue_at, change_key)
  SELECT i.name, i.kind, i.state, i.version, i.recorded_at, i.record, i.open_at, i.created_at, i.overdue_at, pg_current_xact_id()
  FROM input i
  WHERE i.expected IS NULL AND i.version IS NOT NULL AND (SELECT n FROM named) IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM held h WHERE h.name = i.name)
  ORDER BY i.name
  ON CONFLICT (name) DO NOTHING RETURNING name, change_key),
written AS (SELECT name, change_key FROM moved UNION ALL SELECT name, change_key FROM born),
noted AS (
  SELECT i.name FROM input i LEFT JOIN held h ON h.name = i.name
  WHERE i.version IS NULL AND h.version IS NOT DISTINCT FROM i.expected),
scheduled AS (
  UPDATE {s}.operations o SET next_poll_at = i.poll_at, unchanged_polls = i.poll_unchanged, failed_polls = 0, not_found_polls = 0,
    poll_note = NULL
  FROM input i WHERE i.name IN (SELECT name FROM noted) AND o.name = i.name AND i.poll_at IS NOT NULL AND o.next_poll_at IS NOT NULL),
entries AS (
  SELECT * FROM unnest($13::text[], $14::int[], $15::text[], $16::text[], $17::text[], $18::bigint[], $19::text[], $20::text[])
    AS e(name, version, write_kind, record, entry, expires_at, transition, trace)),
logged AS (
  INSERT INTO {s}.changes (tx, name, version, write_kind, new_record)
  SELECT w.change_key, e.name, e.version, e.write_kind, e.record FROM entries e JOIN written w ON w.name = e.name
  ORDER BY e.name, e.version),
kept AS (
  INSERT INTO {s}.history (name, version, entry, expires_at)
  SELECT e.name, e.version, e.entry, e.expires_at FROM entries e JOIN written w ON w.name = e.name
  ON CONFLICT (name, version) DO NOTHING),
queued AS (
  INSERT INTO {s}.effects (name, version, transition, trace)
  SELECT e.name, e.version, e.transition, e.trace FROM entries e JOIN written w ON w.name = e.name WHERE e.transition IS NOT NULL
  ON CONFLICT (name, version) DO NOTHING),
decided AS (
  INSERT INTO {s}.decisions (name, decision, at)
  SELECT d.name, d.decision, $23 FROM unnest($21::text[], $22::text[]) WITH ORDINALITY AS d(name, decision, i)
  WHERE d.name IN (SELECT name FROM written UNION ALL SELECT name FROM noted)
  ORDER BY d.i
  RETURNING id, name),
trimmed AS (
  DELETE FROM {s}.decisions x WHERE x.name IN (SELECT name FROM decided WHERE id % 50 = 0)
    AND x.id <= (SELECT y.id FROM {s}.decisions y WHERE y.name = x.name ORDER BY y.id DESC LIMIT 1 OFFSET ${DECISIONS_KEPT}))
SELECT i.name, (i.name IN (SELECT name FROM written UNION ALL SELECT name FROM noted)) AS ok, h.record AS current
FROM input i LEFT JOIN held h ON h.name = i.name`;

export interface OneWriteOptions {
  historyRetentionDays: number;
  /** Whether each state change also queues its effect. */
  effects: boolean;
}

/**
 * Writes, each answered ok or with the record stored now (the caller reduces
 * again). A write goes at once while fewer than `maxInFlight` statements are
 * on their way; the writes that come meanwhile go together in the next one
 * (each operation once per statement), so under load a statement carries
 * many webhooks and the server and the network see one. A statement the
 * server refuses whole (not for being away) is sent again write by write, so
 * one write the database cannot take fails alone.
 */
export class Writes {
  private waiting: Array<{ write: OneWrite; resolve(outcome: OneWriteOutcome): void; reject(error: unknown): void }> = [];
  private inFlight = 0;

  constructor(
    private readonly db: Postgres,
    private readonly options: OneWriteOptions,
    private readonly maxInFlight = 4,
    private readonly maxBatch = 100,
  ) {}

  write(write: OneWrite): Promise<OneWriteOutcome> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ write, resolve, reject });
      this.send();
    });
  }

  private send(): void {
    while (this.inFlight < this.maxInFlight && this.waiting.length > 0) {
      const names = new Set<string>();
      const batch: typeof this.waiting = [];
      const later: typeof this.waiting = [];
      for (const each of this.waiting)
        if (batch.length < this.maxBatch && !names.has(each.write.name)) {
          names.add(each.write.name);
          batch.push(each);
        } else later.push(each);
      this.waiting = later;
      this.inFlight++;
      void this.statement(batch).finally(() => {
        this.inFlight--;
        this.send();
      });
    }
  }

  private async statement(batch: typeof this.waiting): Promise<void> {
    try {
      const outcomes = await writeAll(
        this.db,
        batch.map((each) => each.write),
        this.options,
      );
      for (const [i, each] of batch.entries()) each.resolve(outcomes[i] as OneWriteOutcome);
    } catch (error) {
      // The database away fails them all alike; anything else may be one write's: each goes alone.
      if (batch.length === 1 || storeAway(error)) for (const each of batch) each.reject(error);
      else for (const each of batch) await this.statement([each]);
      // A database that did not answer in time: the writes queued meanwhile are not sent into the same silence.
      if (unanswered(error)) for (const each of this.waiting.splice(0)) each.reject(error);
    }
  }
}

/** The writes (each of another operation) in one statement: ok, or the record stored now, for each in order. */
async function writeAll(db: Postgres, writes: OneWrite[], options: OneWriteOptions): Promise<OneWriteOutcome[]> {
  const ops: unknown[][] = Array.from({ length: 12 }, () => []);
  const entries: unknown[][] = Array.from({ length: 8 }, () => []);
  const decisions: unknown[][] = [[], []];
  for (const write of writes) {
    const versionRows = rowsOf(write, options);
    const last = write.versions.at(-1);
    const values = [
      write.name,
      write.expected ?? null,
      last?.kind ?? null,
      last?.state ?? null,
      last?.version ?? null,
      last?.recordedAt ?? null,
      versionRows.at(-1)?.[3] ?? null, // the last version's record, as its change-log row has it
      last && !isTerminal(last.state) ? last.recordedAt : null,
      last?.createdAt ?? null,
      write.poll?.nextPollAt ?? null,
      write.poll?.unchangedPolls ?? null,
      last?.overdue?.at ?? null, // marked overdue: out of the index of open jobs by age, into that of the marked ones
    ];
    for (const [i, value] of values.entries()) ops[i]?.push(value);
    for (const row of versionRows) for (const [i, value] of row.entries()) entries[i]?.push(value);
    for (const decision of write.decisions) {
      decisions[0]?.push(write.name);
      decisions[1]?.push(JSON.stringify(decision));
    }
  }
  const { rows } = await db.prepared<{ name: string; ok: boolean; current: string | null }>('write', WRITE, [
    ...ops,
    ...entries,
    ...decisions,
    Date.now(),
  ]);
  const byName = new Map(rows.map((row) => [row.name, row]));
  return writes.map((write) => {
    const row = byName.get(write.name);
    if (row?.ok) return { ok: true };
    return { ok: false, current: row?.current ? (JSON.parse(row.current) as OperationRecord) : undefined };
  });
}

/** The new versions' change-log, history and effect rows, as the statement's entries ($13 to $20). */
function rowsOf({ name, versions, traces }: OneWrite, options: OneWriteOptions): unknown[][] {
  return versions.map((next, i) => {
    const writeKind = writeKindOf(next);
    return [
      name,
      next.version,
      writeKind,
      JSON.stringify(next),
      JSON.stringify(entryOf(next as unknown as Record<string, unknown>)),
      Math.floor(Date.parse(next.recordedAt) / 1000) + options.historyRetentionDays * 86_400,
      options.effects && sendsEffect(writeKind) ? JSON.stringify(transitionOf(next)) : null,
      traces?.[i] ?? null,
    ];
  });
}
