/**
 * What the effects handler keeps, on the embedded engine: the ledger of
 * delivered (sink, transition) pairs and the whole dead letters. The same
 * ports as their DynamoDB tables (app/effects/ledger.ts, dead-letters.ts),
 * each kept 30 days.
 */
import {
  DEAD_LETTER_RETENTION_SECONDS,
  type DeadLetter,
  type DeadLetters,
  entryOf,
  UNDECODABLE,
  type Undecodable,
} from '../../app/effects/dead-letters.ts';
import { type DeliveryAttempts, type EffectLedger, LEDGER_RETENTION_SECONDS } from '../../app/effects/ledger.ts';
import type { Sqlite } from './sqlite.ts';

const nowSeconds = () => Math.floor(Date.now() / 1000);

export class SqliteEffectLedger implements EffectLedger {
  constructor(private readonly db: Sqlite) {}

  async isDelivered(sink: string, key: string): Promise<boolean> {
    return this.db.get('SELECT 1 FROM effect_ledger WHERE key = ?', `${sink}#${key}`) !== undefined;
  }

  async markDelivered(sink: string, key: string, attempts?: DeliveryAttempts): Promise<void> {
    const now = new Date();
    await this.db.writeGrouped(
      () =>
        this.db.run(
          `INSERT INTO effect_ledger (key, delivered_at, expires_at, attempts, earlier_failure) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (key) DO NOTHING`,
          `${sink}#${key}`,
          now.toISOString(),
          Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS,
          attempts?.attempts ?? null,
          attempts?.earlierFailure ?? null,
        ),
      'derived',
    );
  }

  /** How a delivery went (the console): undefined when the ledger holds none for it. */
  delivery(sink: string, key: string): (DeliveryAttempts & { deliveredAt: string }) | undefined {
    const row = this.db.get<{ delivered_at: string; attempts: number | null; earlier_failure: string | null }>(
      'SELECT delivered_at, attempts, earlier_failure FROM effect_ledger WHERE key = ?',
      `${sink}#${key}`,
    );
    return (
      row && {
        deliveredAt: row.delivered_at,
        attempts: row.attempts ?? 1,
        ...(row.earlier_failure && { earlierFailure: row.earlier_failure }),
      }
    );
  }
}

export class SqliteDeadLetters implements DeadLetters {
  constructor(private readonly db: Sqlite) {}

  private save(operation: string, entry: string, status: string | null, letter: unknown): void {
    this.db.writeDerived(() =>
      this.db.run(
        `INSERT INTO dead_letters (operation, entry, status, letter, expires_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (operation, entry) DO UPDATE SET status = excluded.status, letter = excluded.letter, expires_at = excluded.expires_at`,
        operation,
        entry,
        status,
        JSON.stringify(letter),
        nowSeconds() + DEAD_LETTER_RETENTION_SECONDS,
      ),
    );
  }

  async parkUndecodable({ sequence, name, raw }: Undecodable, reason: string): Promise<void> {
    this.save(UNDECODABLE, sequence, null, {
      sequence,
      name,
      reason,
      // As received, as a string: nothing about it is lost or re-encoded.
      raw: typeof raw === 'string' ? raw : JSON.stringify(raw),
      deadLetteredAt: new Date().toISOString(),
    });
  }

  async put(letter: DeadLetter): Promise<void> {
    this.save(letter.name, entryOf(letter.version), letter.status, letter);
  }

  async holdsBack(name: string, version: number): Promise<boolean> {
    return (
      this.db.get("SELECT 1 FROM dead_letters WHERE operation = ? AND entry < ? AND status = 'dead' LIMIT 1", name, entryOf(version)) !==
      undefined
    );
  }

  async remove(name: string, version: number): Promise<void> {
    this.db.writeDerived(() => this.db.run('DELETE FROM dead_letters WHERE operation = ? AND entry = ?', name, entryOf(version)));
  }

  async markRedriving(name: string, version: number): Promise<void> {
    this.db.writeDerived(() => {
      const row = this.db.get<{ letter: string }>(
        'SELECT letter FROM dead_letters WHERE operation = ? AND entry = ?',
        name,
        entryOf(version),
      );
      if (!row) return;
      this.db.run(
        "UPDATE dead_letters SET status = 'redriving', letter = ? WHERE operation = ? AND entry = ?",
        JSON.stringify({ ...JSON.parse(row.letter), status: 'redriving' }),
        name,
        entryOf(version),
      );
    });
  }

  async list(): Promise<DeadLetter[]> {
    return this.db
      .all<{ letter: string }>('SELECT letter FROM dead_letters WHERE operation <> ? ORDER BY operation, entry', UNDECODABLE)
      .map((row) => JSON.parse(row.letter) as DeadLetter);
  }

  async listUndecodable(): Promise<Array<{ sequence: string; name: string | null; reason: string; raw: string }>> {
    return this.db.all<{ letter: string }>('SELECT letter FROM dead_letters WHERE operation = ? ORDER BY entry', UNDECODABLE).map((row) => {
      const { sequence, name, reason, raw } = JSON.parse(row.letter);
      return { sequence, name, reason, raw };
    });
  }
}

/** Removes the ledger's and the dead letters' rows past their 30 days. */
export function pruneEffectRecords(db: Sqlite, now = nowSeconds()): void {
  db.writeDerived(() => {
    db.run('DELETE FROM effect_ledger WHERE expires_at <= ?', now);
    db.run('DELETE FROM dead_letters WHERE expires_at <= ?', now);
  });
}
