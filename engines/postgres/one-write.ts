/**
 * A write to one operation in one statement (one round trip, its own
 * transaction): the compare-and-set of the operations row on the version the
 * reducer read, and with it every row that goes with the change (change log,
 * history, effect) and the events' decisions; or, when the compare-and-set
 * fails, nothing at all and the stored record back, so the caller reduces
 * again without another read. No row lock outlives the statement.
 *
 * How one statement stays exact (READ COMMITTED):
 * - `held` locks the row (`FOR UPDATE`); a row another transaction changed
 *   after this statement's snapshot is waited for and read at its newest
 *   version, so `current` is the winner of a lost race, not the snapshot's.
 * - `moved` updates only at the version reduced against (PostgreSQL rechecks
 *   `version = $2` on the newest row); `born` inserts only where nothing is
 *   stored (a racing insert makes it do nothing).
 * - Everything else is written only if one of those two returned a row.
 * - A batch of discards only (no new version) writes its decisions if the
 *   row is still at that version, without a lock.
 * - A poll's next time and counters go in the same update (or, for a poll
 *   that changed nothing, an update of those columns alone at that version):
 *   a poll's outcome and its schedule are one statement.
 * - `named` sets the transaction's `application_name` before anything can
 *   give it a transaction id (both writes wait for it): the change feed's
 *   horizon waits for it, whatever the pool's own name (change-log.ts).
 */
import { transitionOf } from '../../app/effects/transition.ts';
import { entryOf } from '../../app/history.ts';
import type { Decision } from '../../app/ports.ts';
import { sendsEffect, writeKindOf } from '../../core/change.ts';
import { isTerminal } from '../../core/lifecycle.ts';
import type { OperationRecord } from '../../core/reducer.ts';
import { FEED_WRITER, type Postgres } from './database.ts';

/** Decisions kept per operation (and 30 days, see pruneDecisions), as on SQLite. */
export const DECISIONS_KEPT = 200;

/** What one statement writes for one operation. */
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
}

export type OneWriteOutcome = { ok: true } | { ok: false; current: OperationRecord | undefined };

/** Every ~50th decision trims its operation's to the last DECISIONS_KEPT (not on every write). */
const TRIM = `trimmed AS (
  DELETE FROM {s}.decisions WHERE name = $1 AND EXISTS (SELECT 1 FROM decided WHERE id % 50 = 0)
    AND id <= (SELECT id FROM {s}.decisions WHERE name = $1 ORDER BY id DESC LIMIT 1 OFFSET ${DECISIONS_KEPT}))`;

const WRITE = `WITH named AS MATERIALIZED (SELECT set_config('application_name', '${FEED_WRITER}', true) AS n),
held AS (
  SELECT version, record FROM {s}.operations WHERE name = $1 AND (SELECT n FROM named) IS NOT NULL FOR UPDATE),
moved AS (
  UPDATE {s}.operations o SET kind = $3, state = $4, version = $5, recorded_at = $6, record = $7,
    next_poll_at = CASE WHEN $8::text IS NULL THEN NULL
      WHEN $18::text IS NOT NULL AND o.next_poll_at IS NOT NULL THEN $18::text ELSE coalesce(o.next_poll_at, $8::text) END,
    unchanged_polls = CASE WHEN $18::text IS NULL THEN o.unchanged_polls ELSE $19::int END,
    failed_polls = CASE WHEN $18::text IS NULL THEN o.failed_polls ELSE 0 END,
    not_found_polls = CASE WHEN $18::text IS NULL THEN o.not_found_polls ELSE 0 END,
    poll_note = CASE WHEN $18::text IS NULL THEN o.poll_note END,
    change_key = greatest(pg_current_xact_id(), o.change_key)
  FROM held WHERE o.name = $1 AND o.version = $2::int AND held.version = $2::int
  RETURNING o.change_key),
born AS (
  INSERT INTO {s}.operations (name, kind, state, version, recorded_at, record, next_poll_at, created_at, change_key)
  SELECT $1, $3, $4, $5, $6, $7, $8, $9, pg_current_xact_id()
  WHERE $2::int IS NULL AND NOT EXISTS (SELECT 1 FROM held)
  ON CONFLICT (name) DO NOTHING RETURNING change_key),
written AS (SELECT change_key FROM moved UNION ALL SELECT change_key FROM born),
entries AS (
  SELECT * FROM unnest($10::int[], $11::text[], $12::text[], $13::text[], $14::bigint[], $15::text[])
    AS e(version, write_kind, record, entry, expires_at, transition)),
logged AS (
  INSERT INTO {s}.changes (tx, name, version, write_kind, new_record)
  SELECT written.change_key, $1, e.version, e.write_kind, e.record FROM written, entries e ORDER BY e.version),
kept AS (
  INSERT INTO {s}.history (name, version, entry, expires_at)
  SELECT $1, e.version, e.entry, e.expires_at FROM written, entries e ON CONFLICT (name, version) DO NOTHING),
queued AS (
  INSERT INTO {s}.effects (name, version, transition)
  SELECT $1, e.version, e.transition FROM written, entries e WHERE e.transition IS NOT NULL
  ON CONFLICT (name, version) DO NOTHING),
decided AS (
  INSERT INTO {s}.decisions (name, decision, at)
  SELECT $1, d.decision, $17 FROM written, unnest($16::text[]) WITH ORDINALITY AS d(decision, i) ORDER BY d.i
  RETURNING id),
${TRIM}
SELECT EXISTS (SELECT 1 FROM written) AS ok, (SELECT record FROM held) AS current`;

const NOTE = `WITH seen AS (SELECT version, record FROM {s}.operations WHERE name = $1),
fits AS (SELECT (SELECT version FROM seen) IS NOT DISTINCT FROM $2::int AS ok),
decided AS (
  INSERT INTO {s}.decisions (name, decision, at)
  SELECT $1, d.decision, $4 FROM fits, unnest($3::text[]) WITH ORDINALITY AS d(decision, i) WHERE fits.ok ORDER BY d.i
  RETURNING id),
scheduled AS (
  UPDATE {s}.operations SET next_poll_at = $5, unchanged_polls = $6, failed_polls = 0, not_found_polls = 0, poll_note = NULL
  FROM fits WHERE fits.ok AND $5::text IS NOT NULL AND name = $1 AND version = $2::int AND next_poll_at IS NOT NULL),
${TRIM}
SELECT (SELECT ok FROM fits) AS ok, (SELECT record FROM seen) AS current`;

export interface OneWriteOptions {
  historyRetentionDays: number;
  /** Whether each state change also queues its effect. */
  effects: boolean;
}

/** The write, in one statement: ok, or the record stored now (the caller reduces again). */
export async function writeOnce(db: Postgres, write: OneWrite, options: OneWriteOptions): Promise<OneWriteOutcome> {
  const decisions = write.decisions.map((decision) => JSON.stringify(decision));
  const last = write.versions.at(-1);
  const {
    rows: [row],
  } = last
    ? await db.prepared<{ ok: boolean; current: string | null }>('write', WRITE, [
        write.name,
        write.expected ?? null,
        last.kind,
        last.state,
        last.version,
        last.recordedAt,
        JSON.stringify(last),
        isTerminal(last.state) ? null : last.recordedAt,
        last.createdAt,
        ...columnsOf(write.versions, options),
        decisions,
        Date.now(),
        write.poll?.nextPollAt ?? null,
        write.poll?.unchangedPolls ?? null,
      ])
    : await db.prepared<{ ok: boolean; current: string | null }>('note', NOTE, [
        write.name,
        write.expected ?? null,
        decisions,
        Date.now(),
        write.poll?.nextPollAt ?? null,
        write.poll?.unchangedPolls ?? null,
      ]);
  if (row?.ok) return { ok: true };
  return { ok: false, current: row?.current ? (JSON.parse(row.current) as OperationRecord) : undefined };
}

/** The new versions' change-log, history and effect rows, as the statement's arrays ($10 to $15). */
function columnsOf(versions: OperationRecord[], options: OneWriteOptions): unknown[][] {
  const columns: unknown[][] = [[], [], [], [], [], []];
  for (const next of versions) {
    const writeKind = writeKindOf(next);
    const values = [
      next.version,
      writeKind,
      JSON.stringify(next),
      JSON.stringify(entryOf(next as unknown as Record<string, unknown>)),
      Math.floor(Date.parse(next.recordedAt) / 1000) + options.historyRetentionDays * 86_400,
      options.effects && sendsEffect(writeKind) ? JSON.stringify(transitionOf(next)) : null,
    ];
    for (const [i, value] of values.entries()) columns[i]?.push(value);
  }
  return columns;
}
