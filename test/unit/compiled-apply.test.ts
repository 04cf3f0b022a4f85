/**
 * The DynamoDB store's way to apply an event (engines/dynamodb/compiled-apply.ts)
 * against a table that keeps the compiled condition's contract (its
 * equivalence with DynamoDB's own verdict is proved against moto): how many
 * requests each case costs, the variant switch, and the fallback for items
 * written before `rank` was stored.
 */
import { describe, expect, it } from 'vitest';
import { WriteContentionError } from '../../app/ports.ts';
import { applyEvent, type OperationEvent, type OperationRecord } from '../../core/reducer.ts';
import { applyCompiled, type CompiledTable } from '../../engines/dynamodb/compiled-apply.ts';
import type { Variant } from '../../engines/dynamodb/compiled-write.ts';

const NOW = '2026-12-01T00:00:00.000000000Z';
const running: OperationEvent = {
  name: 'batches/1',
  kind: 'batch',
  state: 'RUNNING',
  providerState: 'JOB_STATE_RUNNING',
  updateTime: '2026-11-30T10:00:00.000000000Z',
  source: 'poll',
};
const succeeded: OperationEvent = { ...running, state: 'SUCCEEDED', providerState: 'batch.succeeded', source: 'webhook', eventId: 'msg_1' };

/** A table with the compiled condition's contract, and a log of its requests. */
class Table implements CompiledTable {
  records = new Map<string, OperationRecord>();
  legacy = new Set<string>();
  requests: string[] = [];
  beforeWrite?: (next: OperationRecord) => void;

  async send(event: OperationEvent, now: string, variant: Variant) {
    this.requests.push(variant);
    const stored = this.records.get(event.name);
    if (stored) this.beforeWrite?.(stored);
    const current = this.records.get(event.name);
    if (current && this.legacy.has(event.name)) return { ok: false as const, current, legacy: true };
    const decision = applyEvent(current, event, now);
    if (!decision.applied || decision.stateChanged !== (variant === 'change')) return { ok: false as const, current, legacy: false };
    this.records.set(event.name, decision.next);
    return { ok: true as const, record: decision.next };
  }

  async write(next: OperationRecord, expectedVersion: number | undefined) {
    this.requests.push('write');
    this.beforeWrite?.(next);
    const stored = this.records.get(next.name);
    if (stored?.version !== expectedVersion) return { ok: false as const, current: stored };
    this.records.set(next.name, next);
    this.legacy.delete(next.name);
    return { ok: true as const };
  }
}

describe('applyCompiled', () => {
  it('applies a state change in one request, and hands back the stored record of a discard in one', async () => {
    const table = new Table();
    expect(await applyCompiled(table, succeeded, NOW)).toMatchObject({ ok: true, record: { state: 'SUCCEEDED', version: 1 } });
    expect(await applyCompiled(table, running, NOW)).toMatchObject({ ok: false, current: { state: 'SUCCEEDED' } });
    expect(table.requests).toEqual(['change', 'change']);
  });

  it('sends a same-state refresh as a change first, then as a refresh once the refusal shows the state; with the record at hand, at once', async () => {
    const table = new Table();
    await applyCompiled(table, running, NOW);
    const later = { ...running, updateTime: '2026-11-30T10:05:00.000000000Z' };
    expect(await applyCompiled(table, later, NOW)).toMatchObject({ ok: true, record: { version: 2, stateChanged: false } });
    expect(table.requests).toEqual(['change', 'change', 'refresh']);
    const latest = { ...running, updateTime: '2026-11-30T10:07:00.000000000Z' };
    expect(await applyCompiled(table, latest, NOW, { current: table.records.get('batches/1') })).toMatchObject({ ok: true });
    expect(table.requests.slice(3)).toEqual(['refresh']);
  });

  it('falls back to read-reduce-compare-version for an item written before rank was stored', async () => {
    const table = new Table();
    await applyCompiled(table, running, NOW);
    table.legacy.add('batches/1');
    expect(await applyCompiled(table, succeeded, NOW)).toMatchObject({ ok: true, record: { state: 'SUCCEEDED', version: 2 } });
    expect(table.requests).toEqual(['change', 'change', 'write']);
  });

  it('gives up with WriteContentionError (never success) when every compare-and-set loses', async () => {
    const table = new Table();
    await applyCompiled(table, running, NOW);
    table.legacy.add('batches/1');
    let version = 0;
    table.beforeWrite = (next) => {
      // Another writer keeps refreshing an earlier state with ever newer times.
      version++;
      table.records.set(next.name, {
        ...next,
        state: 'PENDING',
        updateTime: `2026-11-30T00:00:00.${String(version).padStart(9, '0')}Z`,
        version: 100 + version,
      });
    };
    const sleeps: number[] = [];
    const error = await applyCompiled(table, running, NOW, {
      maxAttempts: 4,
      sleep: async (ms) => void sleeps.push(ms),
      random: () => 1,
    }).catch((e) => e);
    expect(error).toBeInstanceOf(WriteContentionError);
    expect(sleeps).toEqual([10, 20, 40]);
    expect(table.requests.slice(1)).toEqual(['change', 'write', 'write', 'write', 'write']);
  });
});
