/** The engine's one connection, on real SQLite files: locks, refusals and group commit. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StoreRejectedError } from '../../app/ports.ts';
import { Sqlite } from '../../engines/sqlite/sqlite.ts';

let dir: string;
let db: Sqlite;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'ratchet-sqlite-'));
  db = Sqlite.open(join(dir, 'x.db'));
  db.write(() => db.connection.exec('CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER NOT NULL) STRICT'));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});
const count = () => db.get<{ n: number }>('SELECT count(*) AS n FROM t')?.n;

describe('Sqlite', () => {
  it('gives up on a lock another connection holds with a retryable error, and writes again once it is let go', () => {
    const other = Sqlite.open(join(dir, 'x.db'), { plain: true });
    other.connection.exec('BEGIN IMMEDIATE');
    let refused: unknown;
    try {
      db.write(() => db.run("INSERT INTO t VALUES ('a', 1)"));
    } catch (error) {
      refused = error;
    }
    expect((refused as { code?: string }).code).toMatch(/^SQLITE_BUSY/);
    expect(refused).not.toBeInstanceOf(StoreRejectedError);
    expect(count()).toBe(0); // a read meanwhile
    other.run("INSERT INTO t VALUES ('z', 1)");
    other.connection.exec('COMMIT');
    other.close();
    // Where a bare statement would now fail with SQLITE_BUSY_SNAPSHOT (the last case), write() goes on.
    db.write(() => db.run("INSERT INTO t VALUES ('a', 1)"));
    expect(count()).toBe(2);
  });

  it('refuses a value the table can never hold as StoreRejectedError, and rolls the transaction back', () => {
    expect(() =>
      db.write(() => {
        db.run("INSERT INTO t VALUES ('ok', 1)");
        db.run("INSERT INTO t VALUES ('bad', 'not a number')");
      }),
    ).toThrow(StoreRejectedError);
    expect(count()).toBe(0);
  });

  it('commits the writes of one turn together; one that fails leaves the others whole', async () => {
    const results = await Promise.allSettled([
      db.writeGrouped(() => db.run("INSERT INTO t VALUES ('a', 1)").changes),
      db.writeGrouped(() => db.run("INSERT INTO t VALUES ('a', 2)").changes), // the same key: refused
      db.writeGrouped(() => db.get<{ n: number }>('SELECT count(*) AS n FROM t')?.n, 'derived'), // sees the group's earlier write
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason).toBeInstanceOf(StoreRejectedError);
    expect((results[2] as PromiseFulfilledResult<number>).value).toBe(1);
    expect(db.all('SELECT k, n FROM t')).toEqual([{ k: 'a', n: 1 }]);
  });

  it('pins the libsql quirk that shapes write(): a statement refused with SQLITE_BUSY outside a transaction leaves the connection stuck', () => {
    const raw = Sqlite.open(join(dir, 'x.db'), { plain: true }).connection;
    const other = Sqlite.open(join(dir, 'x.db'), { plain: true });
    other.connection.exec('BEGIN IMMEDIATE');
    const insert = () => raw.prepare('INSERT INTO t VALUES (?, ?)').run('q', 1);
    expect(insert).toThrow(expect.objectContaining({ code: 'SQLITE_BUSY' }));
    raw.prepare('SELECT count(*) FROM t').all();
    other.run("INSERT INTO t VALUES ('z', 1)");
    other.connection.exec('COMMIT');
    other.close();
    // The lock is gone, yet this connection cannot write: if this ever fails, write() may drop its workaround.
    expect(insert).toThrow(expect.objectContaining({ code: 'SQLITE_BUSY_SNAPSHOT' }));
    raw.close();
  });
});
