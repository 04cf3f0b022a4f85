/**
 * The database-wide gauges, read in two queries (the console's counts per
 * state and kind, and the effects' backlog per sink) and said as values with
 * their labels: what `/metrics` sets at each scrape and OpenTelemetry
 * observes at each export.
 */

import { isTerminal, OPERATION_KINDS, providerOf } from '../core/lifecycle.ts';
import type { EffectsRecords, EngineStore } from './engine.ts';
import { METRIC } from './telemetry.ts';

/** What a scrape reads of the engine: the operations' counts, and the effects (absent while they are off). */
export interface MetricsSource {
  store: Pick<EngineStore, 'counts'>;
  effects: Pick<EffectsRecords, 'backlog'> | undefined;
}

export const GAUGES = {
  [METRIC.operations]: 'Stored operations by provider, kind and state (tracked: nothing observed yet).',
  [METRIC.oldestOpen]: 'Age in seconds of the oldest open operation of each kind (0: none open), with its provider.',
  [METRIC.overdue]: 'Open operations marked overdue (past OVERDUE_AFTER), by provider and kind.',
  [METRIC.effectsPending]: 'Effects the sink has not taken yet (retrying ones included).',
  [METRIC.effectsRetrying]: 'Effects waiting for the sink whose last attempt failed.',
  [METRIC.effectsDead]: 'Dead-lettered effects the sink never took.',
} as const;

export type GaugeName = keyof typeof GAUGES;

export interface GaugeValue {
  name: GaugeName;
  labels: Record<string, string>;
  value: number;
}

/**
 * Every gauge's values now: each kind's oldest-open age and overdue count (0 where none), each stored kind and state,
 * each sink. A kind's provider is a label beside it.
 */
export async function readGauges(source: MetricsSource, nowMs = Date.now()): Promise<GaugeValue[]> {
  const [counts, backlog] = await Promise.all([source.store.counts(), source.effects?.backlog() ?? []]);
  const values: GaugeValue[] = [];
  for (const kind of OPERATION_KINDS) {
    const rows = counts.filter((row) => row.kind === kind);
    const since = rows.flatMap((row) => (row.oldestOpenSince === null || isTerminal(row.state) ? [] : [Date.parse(row.oldestOpenSince)]));
    const oldest = Math.min(...since.filter(Number.isFinite));
    const labels = { provider: providerOf(kind), kind };
    values.push(
      { name: METRIC.oldestOpen, labels, value: Number.isFinite(oldest) ? Math.max(0, Math.round((nowMs - oldest) / 1000)) : 0 },
      { name: METRIC.overdue, labels, value: rows.reduce((sum, row) => sum + row.overdue, 0) },
    );
  }
  for (const row of counts)
    values.push({
      name: METRIC.operations,
      labels: { provider: providerOf(row.kind), kind: row.kind, state: row.state ?? 'tracked' },
      value: row.count,
    });
  for (const { sink, pending, retrying, deadLettered } of backlog)
    values.push(
      { name: METRIC.effectsPending, labels: { sink }, value: pending },
      { name: METRIC.effectsRetrying, labels: { sink }, value: retrying },
      { name: METRIC.effectsDead, labels: { sink }, value: deadLettered },
    );
  return values;
}
