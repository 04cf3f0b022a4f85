/**
 * History on the embedded engine: every applied write, taken from the outbox
 * (never written on the ingest path), one row per `name` + `version`, kept
 * `HISTORY_RETENTION_DAYS`.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { DEFAULT_HISTORY_RETENTION_DAYS, entryOf, type HistoryEntry, type HistoryLog, MAX_HISTORY_ENTRIES } from '../../app/history.ts';
import type { Change, OutboxConsumer } from './outbox.ts';
import type { Sqlite } from './sqlite.ts';

export class SqliteHistory implements HistoryLog, OutboxConsumer {
  readonly name = 'history';

  constructor(
    private readonly db: Sqlite,
    private readonly logger: Pick<Logger, 'warn'>,
    private readonly retentionDays = DEFAULT_HISTORY_RETENTION_DAYS,
  ) {}

  take(changes: Change[]): void {
    for (const change of changes) {
      const item = parse(change.newRecord);
      if (typeof item?.name !== 'string' || typeof item.version !== 'number' || typeof item.recordedAt !== 'string') {
        this.logger.warn('history: outbox change skipped, not an operation write', { seq: change.seq });
        continue;
      }
      this.put(item.name, entryOf(item));
    }
  }

  async record(name: string, entry: HistoryEntry): Promise<void> {
    this.db.writeDerived(() => this.put(name, entry));
  }

  private put(name: string, entry: HistoryEntry): void {
    const expiresAt = Math.floor(Date.parse(entry.recordedAt) / 1000) + this.retentionDays * 86_400;
    this.db.run(
      'INSERT INTO history (name, version, entry, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (name, version) DO UPDATE SET entry = excluded.entry, expires_at = excluded.expires_at',
      name,
      entry.version,
      JSON.stringify(entry),
      expiresAt,
    );
  }

  async list(name: string): Promise<HistoryEntry[]> {
    return this.db
      .all<{ entry: string }>(
        'SELECT entry FROM history WHERE name = ? AND expires_at > ? ORDER BY version DESC LIMIT ?',
        name,
        Math.floor(Date.now() / 1000),
        MAX_HISTORY_ENTRIES,
      )
      .map((row) => JSON.parse(row.entry) as HistoryEntry)
      .reverse();
  }

  /** Removes entries past their retention. */
  prune(now = Date.now()): void {
    this.db.writeDerived(() => this.db.run('DELETE FROM history WHERE expires_at <= ?', Math.floor(now / 1000)));
  }
}

function parse(json: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(json) as unknown;
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}
