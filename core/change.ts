/**
 * A change as the embedded engine's change feed carries it (GET /changes, its
 * stream, the client's `watch`): one applied write of one operation, made
 * from the record it wrote. Shared by the store (the write's kind), the feed
 * (local/feed) and the client (sdk/client.ts, a snapshot's records).
 */
import { type OperationKind, type OperationState, type ProviderName, providerOf } from './lifecycle.ts';
import type { OperationRecord } from './reducer.ts';

/** One applied write, as the feed carries it: the record it wrote (the effect body's fields among them), and where it sits. */
export interface OperationChange {
  /** This change's place in the feed: pass it back as `after` to read what follows it. */
  cursor: string;
  name: string;
  kind: OperationKind;
  provider: ProviderName;
  /** The operation's version this write made: 1, 2, 3… with none skipped. */
  version: number;
  /** null while the operation is tracked and nothing about it was observed yet. */
  state: OperationState | null;
  previousState: OperationState | null;
  /** Whether this write moved `state` (those are the writes that send an effect). */
  stateChanged: boolean;
  /**
   * `track`, `state-change`, `refresh` (a newer update time, the state unchanged), `result` (a terminal job's
   * outcome, learnt after its state: it sends an `operation.result` effect), or `overdue` (the job found open past
   * its kind's limit: it sends an `operation.overdue` effect).
   */
  writeKind: 'track' | 'state-change' | 'refresh' | 'result' | 'overdue';
  providerState: string | null;
  updateTime: string | null;
  result: OperationRecord['result'];
  /** The application's metadata (tracked with it, or the job's `user_metadata`). */
  userMetadata?: Record<string, unknown>;
  /** Once the job was found overdue: when, and its kind's limit. */
  overdue?: { at: string; afterSeconds: number };
  /** What wrote it: `webhook`, `poll`, `track` or `overdue`. */
  source: OperationRecord['source'];
  createdAt: string;
  recordedAt: string;
  /** When the write committed. */
  committedAt: string;
}

/**
 * Set on a long poll's answer (`GET /operations/{name}?wait=`) by a server that waited: the seconds it would
 * wait. A client that sees none (API Gateway ignores the parameters) falls back to polling.
 */
export const LONG_POLL_HEADER = 'ratchet-long-poll';

/** What kind of write made this version of the record (the outbox's `write_kind`). */
export function writeKindOf(record: Pick<OperationRecord, 'source' | 'stateChanged' | 'resultWrite'>): OperationChange['writeKind'] {
  if (record.source === 'track' || record.source === 'overdue') return record.source;
  if (record.resultWrite) return 'result';
  return record.stateChanged ? 'state-change' : 'refresh';
}

/** The writes that send an effect: each state change, a terminal job's outcome learnt later, and a job found overdue. */
export const EFFECT_WRITE_KINDS: readonly OperationChange['writeKind'][] = ['state-change', 'result', 'overdue'];

export function sendsEffect(writeKind: string): boolean {
  return (EFFECT_WRITE_KINDS as readonly string[]).includes(writeKind);
}

/** The change that made `record`'s version, at `cursor` in the feed. */
export function changeOf(record: OperationRecord, cursor: string, committedAt: string): OperationChange {
  return {
    cursor,
    name: record.name,
    kind: record.kind,
    provider: record.provider ?? providerOf(record.kind),
    version: record.version,
    state: record.state,
    previousState: record.previousState ?? null,
    stateChanged: record.stateChanged,
    writeKind: writeKindOf(record),
    providerState: record.providerState ?? null,
    updateTime: record.updateTime ?? null,
    result: record.result ?? null,
    ...(record.userMetadata && { userMetadata: record.userMetadata }),
    ...(record.overdue && { overdue: record.overdue }),
    source: record.source,
    createdAt: record.createdAt,
    recordedAt: record.recordedAt,
    committedAt,
  };
}
