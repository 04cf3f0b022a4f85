/**
 * `onChange` on PostgreSQL, in one transaction with its delivery's record: the
 * ledger row (`app#<name>#<version>`) is inserted first, then the handler runs
 * with `sql` on the same connection, then both commit together. A handler
 * that writes to this database through `sql` therefore writes once per change,
 * whatever fails: killed before the commit, nothing of it stays and the change
 * is offered again; committed, the ledger row makes every later offer a no-op
 * (and a second instance offering it at once waits on the row, then skips).
 */
import { APP_SINK, changeOf, handlerFailure, type OnChange } from '../../app/effects/app-sink.ts';
import { LEDGER_RETENTION_SECONDS } from '../../app/effects/ledger.ts';
import type { EffectSink } from '../../app/effects/sinks.ts';
import { idempotencyKey, type Transition } from '../../app/effects/transition.ts';
import { EFFECTS_WORKER, type Postgres } from './database.ts';

export class PostgresAppSink implements EffectSink {
  readonly name = APP_SINK;
  constructor(
    private readonly db: Postgres,
    private readonly onChange: OnChange,
  ) {}

  async deliver(transition: Transition): Promise<void> {
    const now = new Date();
    await this.db.transaction(async (tx) => {
      const claimed = await this.db.run(
        `INSERT INTO {s}.effect_ledger (key, delivered_at, expires_at) VALUES ($1, $2, $3) ON CONFLICT (key) DO NOTHING`,
        [`${APP_SINK}#${idempotencyKey(transition)}`, now.toISOString(), Math.floor(now.getTime() / 1000) + LEDGER_RETENTION_SECONDS],
        tx,
      );
      if (claimed === 0) return; // delivered already, committed with the handler's own writes
      try {
        await this.onChange(changeOf(transition), {
          sql: async (text, values) => {
            const result = await tx.query(text, values);
            return { rows: result.rows, rowCount: result.rowCount };
          },
        });
      } catch (error) {
        throw handlerFailure(error);
      }
    }, EFFECTS_WORKER);
  }
}
