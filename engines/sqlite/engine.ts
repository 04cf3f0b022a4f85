/**
 * The SQLite engine behind the Engine port (app/engine.ts): the data folder's
 * file, held by this process alone, with its derived work (history and the
 * effects queue fed from the outbox, derived-work.ts) in a process of its own
 * on a data file, in this one with `:memory:` or inside an application.
 */
import { resolve } from 'node:path';
import { APP_SINK, CallbackSink } from '../../app/effects/app-sink.ts';
import { WEBHOOK_SINK } from '../../app/effects/sinks.ts';
import { type EffectsRecords, type Engine, type EngineOptions, storeMaintenance } from '../../app/engine.ts';
import { IN_MEMORY } from './data-folder.ts';
import { startDerivedProcess } from './derived-supervisor.ts';
import type { DerivedWork } from './derived-work.ts';
import { effectBacklog, pendingEffects, retryingOperations } from './effects-queue.ts';
import { openSqliteEngine } from './open.ts';
import { backlogOf } from './outbox.ts';

export interface SqliteOptions extends EngineOptions {
  /** The data folder (`:memory:`: a database that lives as long as the process). */
  dataDir: string;
  /** History and the effects in this process, not a process of their own (the library, inside an application). */
  inProcess?: boolean;
  /** The derived-work process's entry (a front end's own, which traces: local/derived-process.ts); default this engine's. */
  derivedProcess?: URL;
}

/** The data folder's SQLite file, its derived work in a process of its own (in this one with `:memory:`). */
export function openSqlite(options: SqliteOptions): Engine {
  const { logger } = options;
  let derived: DerivedWork | undefined;
  const engine = openSqliteEngine({
    dataDir: options.dataDir,
    historyRetentionDays: options.work.historyRetentionDays,
    logger,
    onCommit: () => derived?.wake(),
  });
  const { data, store } = engine;
  const { db } = data;
  if (data.tightened.length > 0)
    logger.warn(`data folder: brought to owner-only (0700 for the folder, 0600 for its files): ${data.tightened.join(', ')}`);
  if (data.dynamoDbLocalLeftover)
    logger.warn(
      `${data.dynamoDbLocalLeftover} holds data of the DynamoDB Local runtime (before the embedded engine); it is left as it is and not read`,
    );
  // Reads only, here: history and the effects' records are written by the derived work (derived-work.ts).
  const effects: EffectsRecords | undefined = options.work.effects && {
    ledger: engine.ledger,
    deadLetters: engine.deadLetters,
    pending: (name) => pendingEffects(db, name),
    retrying: () => retryingOperations(db),
    // The sinks derived-work.ts delivers to, by name: the outbound webhook where one is set, the application's onChange.
    backlog: () => effectBacklog(db, [...(options.work.effects?.sink ? [WEBHOOK_SINK] : []), ...(options.onChange ? [APP_SINK] : [])]),
  };
  if (!effects) logger.info('effects off: EFFECTS_WEBHOOK_URL is not set');
  return {
    label: `SQLite (${db.path})`,
    where: db.path,
    store,
    history: engine.history,
    changes: engine.changes,
    health: engine.health,
    effects,
    redrive: (redriveOptions) => {
      if (!derived) throw new Error('the effects process is not running');
      return derived.redrive(redriveOptions);
    },
    // History, the outbox and the effects' records are pruned by the derived work, where they are written.
    maintenance: storeMaintenance(store, options),
    starts: 'on-open',
    start: async () => {
      if (effects) {
        const backlog = backlogOf(db, 'effects', 'state-change');
        // A fresh folder has nothing waiting: nothing to say.
        if (backlog)
          logger.warn(
            `outbound sink: first start: the ${backlog} state change(s) still in the outbox (it keeps a day) are delivered first, then new ones`,
            { backlog },
          );
      }
      // History, the effects queue and the outbound webhook: a process of their own on a data file.
      derived =
        db.path === IN_MEMORY || options.inProcess
          ? (await import('./derived-work.ts')).startDerivedWork(
              db,
              options.work,
              logger,
              options.onChange ? [new CallbackSink(options.onChange)] : [],
              options.telemetry,
            )
          : startDerivedProcess(resolve(db.path), options.work, logger, options.telemetry, options.derivedProcess);
    },
    announce: (url) => data.announce(url),
    close: async (failed) => {
      await derived?.stop();
      if (failed) data.discard();
      else data.close();
    },
  };
}
