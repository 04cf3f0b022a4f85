/**
 * History, the effects ledger and the dead letters on PostgreSQL: the same
 * ports and rows as on SQLite, shared by every instance.
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
import { DEFAULT_HISTORY_RETENTION_DAYS, type HistoryLog, MAX_HISTORY_ENTRIES } from '../../app/history.ts';
import type { HistoryEntry } from '../../core/views.ts';
import type { Postgres } from './database.ts';

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** Every applied write, per operation in version order (the store writes each in its own transaction; `record` is for imports and tests). */
export class PostgresHistory implements HistoryLog {
  constructor(
    private readonly db: Postgres,
    private readonly retentionDays = DEFAULT_HISTORY_RETENTION_DAYS,
  ) {}

  async record(name: string, entry: HistoryEntry): Promise<void> {
    await this.db.run(
      `INSERT INTO {s}.history (name, version, entry, expires_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT (name, version) DO UPDATE SET entry = excluded.entry, expires_at = excluded.expires_at`,
      [name, entry.version, JSON.stringify(entry), Math.floor(Date.parse(entry.recordedAt) / 1000) + this.retentionDays * 86_400],
    );
  }

  async list(name: string): Promise<HistoryEntry[]> {
    const rows = await this.db.rows<{ entry: string }>(
      'SELECT entry FROM {s}.history WHERE name = $1 AND expires_at > $2 ORDER BY version DESC LIMIT $3',
      [name, nowSeconds(), MAX_HISTORY_ENTRIES],
    );
    return rows.map((row) => JSON.parse(row.entry) as HistoryEntry).reverse();
  }

  async prune(now = Date.now()): Promise<void> {
    await this.db.run('DELETE FROM {s}.history WHERE expires_at <= $1', [Math.floor(now / 1000)]);
  }
}

export class PostgresEffectLedger implements EffectLedger {
  constructor(private readonly db: Postgres) {}

  async isDelivered(sink: string, key: string): Promise<boolean> {
    return (await this.db.rows('SELECT 1 FROM {s}.effect_ledger WHERE key = $1', [`${sink}#${key}`])).length > 0;
  }

  async markDelivered(sink: string, key: string, attempts?: DeliveryAttempts): Promise<void> {
    const now = new Date();
    await this.db.run(
      `INSERT INTO {s}.effect_ledger (key, delivered_at, expires_at, attempts, earlier_failure) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (key) DO NOTHING`,
      [
        `${sink}#${key}`,
        now.toISOString(),
        Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS,
        attempts?.attempts ?? null,
        attempts?.earlierFailure ?? null,
      ],
    );
  }

  /** How a delivery went (the console): undefined when the ledger holds none for it. */
  async delivery(sink: string, key: string): Promise<(DeliveryAttempts & { deliveredAt: string }) | undefined> {
    const [row] = await this.db.rows<{ delivered_at: string; attempts: number | null; earlier_failure: string | null }>(
      'SELECT delivered_at, attempts, earlier_failure FROM {s}.effect_ledger WHERE key = $1',
      [`${sink}#${key}`],
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

export class PostgresDeadLetters implements DeadLetters {
  constructor(private readonly db: Postgres) {}

  private async save(operation: string, entry: string, status: string | null, letter: unknown): Promise<void> {
    await this.db.run(
      `INSERT INTO {s}.dead_letters (operation, entry, status, letter, expires_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (operation, entry) DO UPDATE SET status = excluded.status, letter = excluded.letter, expires_at = excluded.expires_at`,
      [operation, entry, status, JSON.stringify(letter), nowSeconds() + DEAD_LETTER_RETENTION_SECONDS],
    );
  }

  async parkUndecodable({ sequence, name, raw }: Undecodable, reason: string): Promise<void> {
    await this.save(UNDECODABLE, sequence, null, {
      sequence,
      name,
      reason,
      raw: typeof raw === 'string' ? raw : JSON.stringify(raw),
      deadLetteredAt: new Date().toISOString(),
    });
  }

  async put(letter: DeadLetter): Promise<void> {
    await this.save(letter.name, entryOf(letter.version), letter.status, letter);
  }

  async holdsBack(name: string, version: number): Promise<boolean> {
    const rows = await this.db.rows("SELECT 1 FROM {s}.dead_letters WHERE operation = $1 AND entry < $2 AND status = 'dead' LIMIT 1", [
      name,
      entryOf(version),
    ]);
    return rows.length > 0;
  }

  async remove(name: string, version: number): Promise<void> {
    await this.db.run('DELETE FROM {s}.dead_letters WHERE operation = $1 AND entry = $2', [name, entryOf(version)]);
  }

  async markRedriving(name: string, version: number): Promise<void> {
    await this.db.run(
      `UPDATE {s}.dead_letters SET status = 'redriving', letter = (letter::jsonb || '{"status":"redriving"}'::jsonb)::text
       WHERE operation = $1 AND entry = $2`,
      [name, entryOf(version)],
    );
  }

  async list(): Promise<DeadLetter[]> {
    const rows = await this.db.rows<{ letter: string }>(
      'SELECT letter FROM {s}.dead_letters WHERE operation <> $1 ORDER BY operation, entry',
      [UNDECODABLE],
    );
    return rows.map((row) => JSON.parse(row.letter) as DeadLetter);
  }

  async listUndecodable(): Promise<Array<{ sequence: string; name: string | null; reason: string; raw: string }>> {
    const rows = await this.db.rows<{ letter: string }>('SELECT letter FROM {s}.dead_letters WHERE operation = $1 ORDER BY entry', [
      UNDECODABLE,
    ]);
    return rows.map((row) => {
      const { sequence, name, reason, raw } = JSON.parse(row.letter);
      return { sequence, name, reason, raw };
    });
  }
}

/** Removes the ledger's and the dead letters' rows past their 30 days. */
export async function pruneEffectRecords(db: Postgres, now = nowSeconds()): Promise<void> {
  await db.run('DELETE FROM {s}.effect_ledger WHERE expires_at <= $1', [now]);
  await db.run('DELETE FROM {s}.dead_letters WHERE expires_at <= $1', [now]);
}
