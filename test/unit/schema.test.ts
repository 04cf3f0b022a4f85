/** The embedded engine's schema steps, on real SQLite files. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS, migrate, SCHEMA_VERSION, SchemaError, schemaVersionOf } from '../../engines/sqlite/schema.ts';
import { Sqlite } from '../../engines/sqlite/sqlite.ts';

const dirs: string[] = [];
function freshFile(): Sqlite {
  const dir = mkdtempSync(join(tmpdir(), 'ratchet-schema-'));
  dirs.push(dir);
  return Sqlite.open(join(dir, 'ratchet.db'));
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const ONE = 'CREATE TABLE things (id INTEGER PRIMARY KEY, label TEXT NOT NULL) STRICT;';
const TWO = "ALTER TABLE things ADD COLUMN colour TEXT NOT NULL DEFAULT 'grey';";

describe('the schema', () => {
  it('brings a new file to the current version', () => {
    const db = freshFile();
    expect(migrate(db)).toBe(0);
    expect(schemaVersionOf(db)).toBe(SCHEMA_VERSION);
    const tables = db.all<{ name: string }>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    );
    expect(tables.map((t) => t.name)).toEqual([
      'changes',
      'checkpoints',
      'dead_letters',
      'decisions',
      'effect_ledger',
      'effect_messages',
      'history',
      'notes',
      'operations',
      'unprocessable',
    ]);
    expect(migrate(db)).toBe(SCHEMA_VERSION); // a second start changes nothing
    db.close();
  });

  it('moves a file of version 1 (before the decisions log) to this one, keeping its operations', () => {
    const db = freshFile();
    migrate(db, MIGRATIONS.slice(0, 1));
    db.write(() =>
      db.run(
        "INSERT INTO operations (name, kind, state, version, recorded_at, record, poll_bucket) VALUES ('batches/old', 'batch', 'SUCCEEDED', 2, 't', '{}', 'open#0')",
      ),
    );
    expect(db.all("SELECT name FROM sqlite_master WHERE name = 'decisions'")).toEqual([]);
    expect(migrate(db)).toBe(1);
    expect(db.all('SELECT name, version FROM operations')).toEqual([{ name: 'batches/old', version: 2 }]);
    expect(db.all("SELECT name FROM sqlite_master WHERE name IN ('decisions', 'unprocessable') ORDER BY name")).toEqual([
      { name: 'decisions' },
      { name: 'unprocessable' },
    ]);
    db.close();
  });

  it('back-fills the overdue columns of schema 6 from the records: the marked open job counted, the unmarked one found by age', () => {
    const db = freshFile();
    migrate(db, MIGRATIONS.slice(0, 5));
    const row = (name: string, overdue?: object) =>
      db.run(
        "INSERT INTO operations (name, kind, state, version, recorded_at, record, poll_bucket) VALUES (?, 'interaction', 'RUNNING', 2, 't', ?, 'open')",
        name,
        JSON.stringify({ name, createdAt: '2026-12-01T00:00:00.000000000Z', ...(overdue && { overdue }) }),
      );
    db.write(() => {
      row('interactions/marked', { at: '2026-12-01T03:00:00.000000000Z', afterSeconds: 7200 });
      row('interactions/unmarked');
    });
    expect(migrate(db)).toBe(5);
    expect(db.all('SELECT name, created_at, overdue_at FROM operations ORDER BY name')).toEqual([
      { name: 'interactions/marked', created_at: '2026-12-01T00:00:00.000000000Z', overdue_at: '2026-12-01T03:00:00.000000000Z' },
      { name: 'interactions/unmarked', created_at: '2026-12-01T00:00:00.000000000Z', overdue_at: null },
    ]);
    db.close();
  });

  it('moves a file written at an earlier version forward, keeping its rows', () => {
    const db = freshFile();
    migrate(db, [ONE]);
    db.write(() => db.run("INSERT INTO things (label) VALUES ('kept')"));
    expect(migrate(db, [ONE, TWO])).toBe(1);
    expect(schemaVersionOf(db)).toBe(2);
    expect(db.all('SELECT label, colour FROM things')).toEqual([{ label: 'kept', colour: 'grey' }]);
    db.close();
  });

  it('leaves the file at its version when a step fails, and refuses a newer file', () => {
    const db = freshFile();
    migrate(db, [ONE]);
    expect(() => migrate(db, [ONE, `${TWO} CREATE TABLE things (x);`])).toThrow();
    expect(schemaVersionOf(db)).toBe(1);
    expect(db.all('PRAGMA table_info(things)').map((c) => (c as { name: string }).name)).toEqual(['id', 'label']);
    expect(() => migrate(db, [])).toThrow(SchemaError);
    db.close();
  });
});
