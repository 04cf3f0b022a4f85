/**
 * The application's own function as an effects sink (Ratchet inside an app,
 * `createRatchet({ onChange })`): each applied state change handed to it as
 * the signed webhook's body would carry it, with the same guarantees (once per
 * change through the ledger, in version order per operation, retried with
 * backoff, dead-lettered after its window, redriven). A handler that throws
 * is a failed delivery, its message the outcome the console shows.
 */
import { type EffectSink, SinkError } from './sinks.ts';
import { type EffectType, effectEvent, idempotencyKey, type Transition } from './transition.ts';

/**
 * One applied state change (or a job found overdue: `type: operation.overdue`), as `onChange` receives it: the
 * outbound webhook's body, with its `webhook-id` as `id`.
 */
export interface StateChange {
  /** `<name>#<version>`: the same on every retry. */
  id: string;
  type: EffectType;
  timestamp: string;
  data: Omit<Transition, 'recordedAt'>;
}

/** What a handler gets beside the change: on PostgreSQL, `sql` runs in the transaction that records the delivery. */
export interface ChangeContext {
  /** A query in the delivery's own transaction (PostgreSQL only): committed with it, rolled back if the handler throws. */
  sql?: (text: string, values?: unknown[]) => Promise<{ rows: Record<string, unknown>[]; rowCount: number | null }>;
}

export type OnChange = (change: StateChange, context: ChangeContext) => unknown;

/** The sink's name in the ledger (`app#<name>#<version>`). */
export const APP_SINK = 'app';

export function changeOf(transition: Transition): StateChange {
  const { type, timestamp, data } = effectEvent(transition);
  return { id: idempotencyKey(transition), type, timestamp, data };
}

/** A handler's failure as a delivery's outcome, in one line. */
export function handlerFailure(error: unknown): SinkError {
  const message = error instanceof Error ? error.message : String(error);
  return new SinkError(`onChange threw: ${message}`, { outcome: `onChange threw: ${message.split('\n')[0]?.slice(0, 300)}` });
}

/** `onChange` in this process, outside any transaction (the SQLite engine's). */
export class CallbackSink implements EffectSink {
  readonly name = APP_SINK;
  constructor(private readonly onChange: OnChange) {}

  async deliver(transition: Transition): Promise<void> {
    try {
      await this.onChange(changeOf(transition), {});
    } catch (error) {
      throw handlerFailure(error);
    }
  }
}
