/**
 * An in-memory OperationStore with fault injection, for unit tests only: the
 * port's contract at its simplest (apply is read, reduce, write, atomically).
 */

import type {
  ApplyOutcome,
  DeliveryReceipts,
  OperationStore,
  UnmappedDelivery,
  UnprocessableDelivery,
  UnprocessableLog,
  WriteOutcome,
} from '../../app/ports.ts';
import { applyEvent, type OperationEvent, type OperationRecord } from '../../core/reducer.ts';

export class MemoryStore implements OperationStore, DeliveryReceipts, UnprocessableLog {
  unmapped: UnmappedDelivery[] = [];
  /** Unprocessable deliveries, by webhook-id, oldest first. */
  unprocessable = new Map<string, UnprocessableDelivery>();
  failReceipts = false;
  records = new Map<string, OperationRecord>();
  writes = 0;
  /** Called before every write; may mutate records (a racing writer) or throw (an outage). */
  beforeWrite?: (next: OperationRecord) => void;
  failReads = false;
  /** Every `apply` and `write` request, in order. */
  requests: Array<'apply' | 'write'> = [];

  async get(name: string) {
    if (this.failReads) throw new Error('store unavailable');
    const record = this.records.get(name);
    return record && structuredClone(record);
  }

  async apply(event: OperationEvent, now: string): Promise<ApplyOutcome> {
    if (this.failReads) throw new Error('store unavailable');
    this.requests.push('apply');
    const stored = this.records.get(event.name);
    this.beforeWrite?.({ ...(stored ?? ({} as OperationRecord)), name: event.name });
    const current = this.records.get(event.name);
    const decision = applyEvent(current, event, now);
    if (!decision.applied) return { ok: false, current: current && structuredClone(current) };
    this.records.set(event.name, structuredClone(decision.next));
    this.writes++;
    return { ok: true, record: structuredClone(decision.next) };
  }

  async write(next: OperationRecord, expectedVersion: number | undefined): Promise<WriteOutcome> {
    this.requests.push('write');
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

  async recordUnprocessable(delivery: UnprocessableDelivery) {
    if (this.failReads) throw new Error('store unavailable');
    this.unprocessable.delete(delivery.webhookId);
    this.unprocessable.set(delivery.webhookId, delivery);
  }

  async listUnprocessable({ limit }: { limit: number }) {
    return { decisions: [...this.unprocessable.values()].reverse().slice(0, limit) };
  }

  async lastUnmapped() {
    const last = this.unmapped.at(-1);
    return last && { ...last, received: this.unmapped.length };
  }
}
