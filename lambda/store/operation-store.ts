/** The persistence port: everything ingest and the API need from storage. */
import type { OperationRecord } from '../core/reducer.ts';

export type WriteOutcome = { ok: true } | { ok: false; current: OperationRecord | undefined };

export interface OperationStore {
  /** A strongly consistent read. */
  get(name: string): Promise<OperationRecord | undefined>;
  /**
   * Writes `next` only if the stored version is still `expectedVersion`
   * (`undefined`: only if nothing is stored). On a lost race, returns the
   * winning record without another read.
   */
  write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome>;
}
