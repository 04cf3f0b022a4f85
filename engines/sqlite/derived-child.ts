/**
 * The embedded engine's derived work as a process of its own (see
 * derived-work.ts), what its entry runs: started by the runtime with `fork`,
 * told its data file and configuration in its first message, woken after each
 * commit, asked to redrive, told to stop. It ends with its parent: when the
 * IPC channel closes (the runtime stopped or was killed), it stops too.
 *
 * The entry is the front end's (local/derived-process.ts, which traces with
 * its OpenTelemetry SDK) or this engine's own (derived-process.ts, which
 * traces nothing): the engine never loads a telemetry SDK itself.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { createLogger } from '../../app/logger.ts';
import type { Telemetry } from '../../app/telemetry.ts';
import type { ToChild, ToParent } from './derived-supervisor.ts';
import type { DerivedWork, DerivedWorkOptions } from './derived-work.ts';
import { Sqlite } from './sqlite.ts';

/** What traces each effect's delivery in this process: its spans, and a last export at the end. */
export interface ChildTracing {
  telemetry: Pick<Telemetry, 'span'>;
  shutdown(): Promise<void>;
}

/** Serves the parent's messages until it stops or goes; `tracing` started with the work, where the entry traces. */
export function serveDerivedWork(tracing?: (logger: Logger) => Promise<ChildTracing | undefined>): void {
  const send = (message: ToParent) => process.send?.(message);
  const logger = createLogger();
  let work: DerivedWork | undefined;
  let otel: ChildTracing | undefined;
  let db: Sqlite | undefined;
  let stopping = false;

  async function stop(code: number): Promise<never> {
    if (!stopping) {
      stopping = true;
      await work?.stop().catch(() => undefined);
      db?.close();
      await otel?.shutdown();
    }
    process.exit(code);
  }

  let started: Promise<void> | undefined;
  const start = async (dbFile: string, options: DerivedWorkOptions) => {
    // This connection checkpoints the WAL (SQLite's automatic checkpoint, on its commits): the runtime's does not.
    db = Sqlite.open(dbFile);
    // Each delivery's lag is counted by the runtime, which serves /metrics; its spans are exported from here.
    otel ??= await tracing?.(logger);
    const telemetry: Telemetry = {
      webhook: () => {},
      poll: () => {},
      effect: (sink, lagSeconds) => send({ type: 'effect', sink, lagSeconds }),
      ...(otel?.telemetry.span && { span: otel.telemetry.span }),
    };
    // Loaded here, in the child: engines/sqlite/index.ts exports this file, and the parent's start must not load the effects path.
    const { startDerivedWork } = await import('./derived-work.ts');
    work = startDerivedWork(db, options, logger, [], telemetry);
    send({ type: 'ready' });
  };

  process.on('disconnect', () => void stop(0));
  process.on('message', async (message: ToChild) => {
    try {
      if (message.type === 'start') {
        started = start(message.dbFile, message.options);
        await started;
      } else if (message.type === 'wake') work?.wake();
      else if (message.type === 'stop') await stop(0);
      else if (message.type === 'redrive') {
        try {
          // Asked while its start still awaits the tracing's SDK: answered once it is up.
          await started;
          send({ type: 'redriven', id: message.id, result: await (work as DerivedWork).redrive(message.options) });
        } catch (error) {
          send({ type: 'redrive-failed', id: message.id, message: (error as Error).message });
        }
      }
    } catch (error) {
      logger.error('effects process failed', { error });
      await stop(1);
    }
  });
}
