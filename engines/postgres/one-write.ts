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
 * - `locked` locks the rows (`FOR UPDATE`, in name order); a row another
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
import { storeAway } from '../../core/network.ts';
import { isPolled, type OperationRecord } from '../../core/reducer.ts';
import { type AnswerNow, Coalescer, Failed } from '../sql/coalescer.ts';
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

/** One column of the statement's input: its name, its SQL type, and its value read from one row (`o`: the store's options). */
interface Column<Row> {
  name: string;
  type: 'text' | 'int' | 'bigint';
  of(row: Row, o: OneWriteOptions): unknown;
}

/** A write's row of `input`: the operation's new row (from its last version) and how to write it. */
interface OperationInput {
  write: OneWrite;
  last: OperationRecord | undefined;
  /** The last version's record, as its change-log row has it. */
  record: string | null;
}

/** A new version's row of `entries`: its change-log, history and effect rows. */
interface VersionInput {
  name: string;
  next: OperationRecord;
  writeKind: ReturnType<typeof writeKindOf>;
  record: string;
  trace: string | null;
}

/** `input`: a row per write. */
const OPERATION_COLUMNS: Array<Column<OperationInput>> = [
  { name: 'name', type: 'text', of: ({ write }) => write.name },
  { name: 'expected', type: 'int', of: ({ write }) => write.expected ?? null },
  { name: 'kind', type: 'text', of: ({ last }) => last?.kind ?? null },
  { name: 'state', type: 'text', of: ({ last }) => last?.state ?? null },
  { name: 'version', type: 'int', of: ({ last }) => last?.version ?? null },
  { name: 'recorded_at', type: 'text', of: ({ last }) => last?.recordedAt ?? null },
  { name: 'record', type: 'text', of: ({ record }) => record },
  { name: 'open_at', type: 'text', of: ({ last }) => (last && isPolled(last) ? last.recordedAt : null) },
  { name: 'created_at', type: 'text', of: ({ last }) => last?.createdAt ?? null },
  { name: 'poll_at', type: 'text', of: ({ write }) => write.poll?.nextPollAt ?? null },
  { name: 'poll_unchanged', type: 'int', of: ({ write }) => write.poll?.unchangedPolls ?? null },
  // Marked overdue: out of the index of open jobs by age, into that of the marked ones.
  { name: 'overdue_at', type: 'text', of: ({ last }) => last?.overdue?.at ?? null },
];

/** `entries`: a row per new version. */
const VERSION_COLUMNS: Array<Column<VersionInput>> = [
  { name: 'name', type: 'text', of: (v) => v.name },
  { name: 'version', type: 'int', of: (v) => v.next.version },
  { name: 'write_kind', type: 'text', of: (v) => v.writeKind },
  { name: 'record', type: 'text', of: (v) => v.record },
  { name: 'entry', type: 'text', of: (v) => JSON.stringify(entryOf(v.next as unknown as Record<string, unknown>)) },
  { name: 'expires_at', type: 'bigint', of: (v, o) => Math.floor(Date.parse(v.next.recordedAt) / 1000) + o.historyRetentionDays * 86_400 },
  { name: 'transition', type: 'text', of: (v, o) => (o.effects && sendsEffect(v.writeKind) ? JSON.stringify(transitionOf(v.next)) : null) },
  { name: 'trace', type: 'text', of: (v) => v.trace },
];

/** The decisions, a row each, in order. */
const DECISION_COLUMNS: Array<Column<{ name: string; decision: Decision }>> = [
  { name: 'name', type: 'text', of: (d) => d.name },
  { name: 'decision', type: 'text', of: (d) => JSON.stringify(d.decision) },
];

/**
 * Rows sent as one array per column and read back as a table by `unnest`:
 * the statement's text and its parameters both from `columns`, numbered from
 * `first`, so a column is one line of its table.
 */
function unnested<Row>(columns: Array<Column<Row>>, first: number) {
  const array = (i: number) => `$${first + i}::${columns[i]?.type}[]`;
  return {
    /** `unnest($n::type[], …)` */
    from: `unnest(${columns.map((_, i) => array(i)).join(', ')})`,
    /** The column names, for the table's alias. */
    names: columns.map((column) => column.name).join(', '),
    /** The parameter that carries one column. */
    arrayOf(name: string): string {
      const i = columns.findIndex((column) => column.name === name);
      if (i < 0) throw new Error(`no input column ${name}`);
      return array(i);
    },
    /** The first parameter number after these. */
    next: first + columns.length,
    params: (rows: Row[], options: OneWriteOptions): unknown[][] => columns.map((column) => rows.map((row) => column.of(row, options))),
  };
}

const INPUT = unnested(OPERATION_COLUMNS, 1);
const ENTRIES = unnested(VERSION_COLUMNS, INPUT.next);
const DECISIONS = unnested(DECISION_COLUMNS, ENTRIES.next);
/** The decisions' time (epoch ms), after the arrays. */
const DECIDED_AT = `$${DECISIONS.next}`;

/**
 * Every write of a batch, in one statement; each operation at most once.
 * Rows are locked in name order and new ones inserted in name order, so two
 * instances' batches never wait on each other in a cycle.
 */
const WRITE = `WITH named AS MATERIALIZED (SELECT set_config('application_name', '${FEED_WRITER}', true) AS n),
input AS (SELECT * FROM ${INPUT.from} AS i(${INPUT.names})),
locked AS (
  SELECT name, version, record FROM {s}.operations WHERE name = ANY(${INPUT.arrayOf('name')}) AND (SELECT n FROM named) IS NOT NULL
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
  FROM input i JOIN locked l ON l.name = i.name
  WHERE o.name = i.name AND i.version IS NOT NULL AND o.version = i.expected AND l.version = i.expected
  RETURNING o.name, o.change_key),
born AS (
  INSERT INTO {s}.operations (name, kind, state, version, recorded_at, record, next_poll_at, created_at, overdue_at, change_key)
  SELECT i.name, i.kind, i.state, i.version, i.recorded_at, i.record, i.open_at, i.created_at, i.overdue_at, pg_current_xact_id()
  FROM input i
  WHERE i.expected IS NULL AND i.version IS NOT NULL AND (SELECT n FROM named) IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM locked l WHERE l.name = i.name)
  ORDER BY i.name
  ON CONFLICT (name) DO NOTHING RETURNING name, change_key),
written AS (SELECT name, change_key FROM moved UNION ALL SELECT name, change_key FROM born),
noted AS (
  SELECT i.name FROM input i LEFT JOIN locked l ON l.name = i.name
  WHERE i.version IS NULL AND l.version IS NOT DISTINCT FROM i.expected),
scheduled AS (
  UPDATE {s}.operations o SET next_poll_at = i.poll_at, unchanged_polls = i.poll_unchanged, failed_polls = 0, not_found_polls = 0,
    poll_note = NULL
  FROM input i WHERE i.name IN (SELECT name FROM noted) AND o.name = i.name AND i.poll_at IS NOT NULL AND o.next_poll_at IS NOT NULL),
entries AS (SELECT * FROM ${ENTRIES.from} AS e(${ENTRIES.names})),
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
  SELECT d.name, d.decision, ${DECIDED_AT} FROM ${DECISIONS.from} WITH ORDINALITY AS d(${DECISIONS.names}, i)
  WHERE d.name IN (SELECT name FROM written UNION ALL SELECT name FROM noted)
  ORDER BY d.i
  RETURNING id, name),
trimmed AS (
  DELETE FROM {s}.decisions x WHERE x.name IN (SELECT name FROM decided WHERE id % 50 = 0)
    AND x.id <= (SELECT y.id FROM {s}.decisions y WHERE y.name = x.name ORDER BY y.id DESC LIMIT 1 OFFSET ${DECISIONS_KEPT}))
SELECT i.name, (i.name IN (SELECT name FROM written UNION ALL SELECT name FROM noted)) AS ok, l.record AS current
FROM input i LEFT JOIN locked l ON l.name = i.name`;

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
 * many webhooks and the server and the network see one (a coalescer,
 * engines/sql/coalescer.ts). A statement the server refuses whole (not for
 * being away) is sent again write by write, each answered as it comes back,
 * so one write the database cannot take fails alone; one the database did
 * not answer in time fails the writes waiting behind it too.
 */
export class Writes {
  private readonly statements: Coalescer<OneWrite, OneWriteOutcome>;

  constructor(
    private readonly db: Postgres,
    private readonly options: OneWriteOptions,
    maxInFlight = 4,
    maxBatch = 100,
  ) {
    this.statements = new Coalescer((writes, answer) => this.statement(writes, answer), {
      maxInFlight,
      maxBatch,
      keyOf: (write) => write.name,
    });
  }

  write(write: OneWrite): Promise<OneWriteOutcome> {
    return this.statements.push(write);
  }

  private async statement(writes: OneWrite[], answer: AnswerNow<OneWrite, OneWriteOutcome>): Promise<Array<OneWriteOutcome | Failed>> {
    try {
      return await writeAll(this.db, writes, this.options);
    } catch (error) {
      // The database away fails them all alike; anything else may be one write's: each goes alone, answered as it comes back.
      const alone = writes.length === 1 || storeAway(error) ? undefined : await this.eachAlone(writes, answer);
      // A database that did not answer in time: the writes queued meanwhile are not sent into the same silence.
      if (unanswered(error)) this.statements.failWaiting(error);
      if (!alone) throw error;
      return alone;
    }
  }

  private async eachAlone(writes: OneWrite[], answer: AnswerNow<OneWrite, OneWriteOutcome>): Promise<Array<OneWriteOutcome | Failed>> {
    const answers: Array<OneWriteOutcome | Failed> = [];
    for (const write of writes) {
      const [outcome] = await this.statement([write], answer).catch((error: unknown) => [new Failed(error)]);
      answer(write, outcome as OneWriteOutcome | Failed);
      answers.push(outcome as OneWriteOutcome | Failed);
    }
    return answers;
  }
}

/** The writes (each of another operation) in one statement: ok, or the record stored now, for each in order. */
async function writeAll(db: Postgres, writes: OneWrite[], options: OneWriteOptions): Promise<OneWriteOutcome[]> {
  const operations: OperationInput[] = [];
  const versions: VersionInput[] = [];
  const decisions: Array<{ name: string; decision: Decision }> = [];
  for (const write of writes) {
    const { name, traces } = write;
    const rows = write.versions.map((next, i) => ({
      name,
      next,
      writeKind: writeKindOf(next),
      record: JSON.stringify(next),
      trace: traces?.[i] ?? null,
    }));
    versions.push(...rows);
    operations.push({ write, last: write.versions.at(-1), record: rows.at(-1)?.record ?? null });
    for (const decision of write.decisions) decisions.push({ name, decision });
  }
  const { rows } = await db.prepared<{ name: string; ok: boolean; current: string | null }>('write', WRITE, [
    ...INPUT.params(operations, options),
    ...ENTRIES.params(versions, options),
    ...DECISIONS.params(decisions, options),
    Date.now(),
  ]);
  const byName = new Map(rows.map((row) => [row.name, row]));
  return writes.map((write) => {
    const row = byName.get(write.name);
    if (row?.ok) return { ok: true };
    return { ok: false, current: row?.current ? (JSON.parse(row.current) as OperationRecord) : undefined };
  });
}
