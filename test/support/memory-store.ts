/** An in-memory OperationStore with fault injection, for unit tests only. */
import type { OperationRecord } from '../../lambda/core/reducer.ts';
import type { DeliveryReceipts, OperationStore, UnmappedDelivery, WriteOutcome } from '../../lambda/store/operation-store.ts';

export class MemoryStore implements OperationStore, DeliveryReceipts {
  unmapped: UnmappedDelivery[] = [];
  failReceipts = false;
  records = new Map<string, OperationRecord>();
  writes = 0;
  /** Called before every write; may mutate records (a racing writer) or throw (an outage). */
  beforeWrite?: (next: OperationRecord) => void;
  failReads = false;

  async get(name: string) {
    if (this.failReads) throw new Error('store unavailable');
    const record = this.records.get(name);
    return record && structuredClone(record);
  }

  async write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome> {
    this.beforeWrite?.(next);
    const stored = this.records.get(next.name);
    if (stored?.version !== expectedVersion) return { ok: false, current: stored && structuredClone(stored) };
    this.records.set(next.name, structuredClone(next));
    this.writes++;
    return { ok: true };
  }

  async recordUnmapped(delivery: UnmappedDelivery) {
    if (this.failReceipts) throw new Error('store unavailable');
    this.unmapped.push(delivery);
  }

  async lastUnmapped() {
    const last = this.unmapped.at(-1);
    return last && { ...last, received: this.unmapped.length };
  }
}
