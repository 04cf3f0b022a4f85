/**
 * The console's sign-ins on PostgreSQL, shared by every instance: a session
 * begun at one is honoured by all, a one-time code printed or asked for at
 * one is taken once at any (DELETE … RETURNING). Keys are digests of the
 * secrets (local/access/guard.ts); expired rows are pruned with the rest.
 */
import type { SignInStore } from '../../app/ports.ts';
import type { Postgres } from './database.ts';

export class PostgresSignIns implements SignInStore {
  constructor(private readonly db: Postgres) {}

  async put(key: string, value: string, expiresAtMs: number): Promise<void> {
    await this.db.run(
      'INSERT INTO {s}.sign_ins (key, value, expires_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at',
      [key, value, expiresAtMs],
    );
  }

  async get(key: string, nowMs: number): Promise<string | undefined> {
    const [row] = await this.db.rows<{ value: string }>('SELECT value FROM {s}.sign_ins WHERE key = $1 AND expires_at > $2', [key, nowMs]);
    return row?.value;
  }

  async take(key: string, nowMs: number): Promise<string | undefined> {
    const [row] = await this.db.rows<{ value: string; expires_at: string }>(
      'DELETE FROM {s}.sign_ins WHERE key = $1 RETURNING value, expires_at',
      [key],
    );
    return row && Number(row.expires_at) > nowMs ? row.value : undefined;
  }

  async delete(key: string): Promise<void> {
    await this.db.run('DELETE FROM {s}.sign_ins WHERE key = $1', [key]);
  }
}

/** Removes expired sign-ins (hourly, with the other pruning). */
export async function pruneSignIns(db: Postgres, nowMs = Date.now()): Promise<void> {
  await db.run('DELETE FROM {s}.sign_ins WHERE expires_at <= $1', [nowMs]);
}
