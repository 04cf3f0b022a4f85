/**
 * The embedded engine's derived work as a process of its own (see
 * derived-work.ts): started by the runtime with `fork`, told its data file
 * and configuration in its first message, woken after each commit, asked to
 * redrive, told to stop. It ends with its parent: when the IPC channel
 * closes (the runtime stopped or was killed), it stops too.
 */
import { createLogger } from '../../app/logger.ts';
import type { OpenTelemetry } from '../../app/otel.ts';
import { otlpRequested, type Telemetry } from '../../app/telemetry.ts';
import type { ToChild, ToParent } from './derived-supervisor.ts';
import { type DerivedWork, startDerivedWork } from './derived-work.ts';
import { Sqlite } from './sqlite.ts';

const send = (message: ToParent) => process.send?.(message);
const logger = createLogger();
let work: DerivedWork | undefined;
let otel: OpenTelemetry | undefined;
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

process.on('disconnect', () => void stop(0));
process.on('message', async (message: ToChild) => {
  try {
    if (message.type === 'start') {
      // This connection checkpoints the WAL (SQLite's automatic checkpoint, on its commits): the runtime's does not.
      db = Sqlite.open(message.dbFile);
      // Each delivery's lag is counted by the runtime, which serves /metrics; its spans are exported from here.
      otel ??= otlpRequested() ? (await import('../../app/otel.ts')).startOpenTelemetry(logger, { metrics: false }) : undefined;
      const telemetry: Telemetry = {
        webhook: () => {},
        poll: () => {},
        effect: (sink, lagSeconds) => send({ type: 'effect', sink, lagSeconds }),
        ...(otel?.telemetry.span && { span: otel.telemetry.span }),
      };
      work = startDerivedWork(db, message.options, logger, [], telemetry);
      send({ type: 'ready' });
    } else if (message.type === 'wake') work?.wake();
    else if (message.type === 'stop') await stop(0);
    else if (message.type === 'redrive') {
      try {
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
