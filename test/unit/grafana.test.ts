/**
 * docs/grafana/ratchet.json, the dashboard docs/operations.md offers: an
 * import Grafana takes (its datasource an input, panels laid out without
 * overlap), built on the names `/metrics` serves and no other, with a panel
 * for each thing the issue asks it to show, and the database's gauges taken
 * with `max` (every instance reports the same value: a `sum` would multiply
 * them by the number of instances), and every metric labelled by kind
 * filtered by the provider chosen.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { GAUGES } from '../../app/gauges.ts';
import { METRIC } from '../../app/telemetry.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

interface Panel {
  id: number;
  title: string;
  type: string;
  datasource: { uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets: Array<{ expr: string; refId: string; datasource: { uid: string } }>;
}

const dashboard = JSON.parse(readFileSync(join(PROJECT_ROOT, 'docs/grafana/ratchet.json'), 'utf8')) as {
  __inputs: Array<{ name: string; pluginId: string }>;
  panels: Panel[];
  uid: string;
  schemaVersion: number;
  templating: { list: Array<{ name: string; query: { query: string }; includeAll: boolean; allValue: string }> };
};
const exprs = dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr));
const HISTOGRAMS = new Set<string>([METRIC.webhookSeconds, METRIC.effectLag]);
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own placeholder for the datasource chosen at import
const DATASOURCE = '${DS_PROMETHEUS}';

describe('the Grafana dashboard', () => {
  it('imports with a Prometheus datasource chosen at import, its panels laid out on the 24-column grid without overlap', () => {
    expect(dashboard.__inputs).toEqual([expect.objectContaining({ name: 'DS_PROMETHEUS', pluginId: 'prometheus' })]);
    expect(dashboard.uid).toBe('ratchet');
    expect(new Set(dashboard.panels.map((p) => p.id)).size).toBe(dashboard.panels.length);
    for (const panel of dashboard.panels) {
      expect(panel.datasource.uid, panel.title).toBe(DATASOURCE);
      for (const target of panel.targets) expect(target.datasource.uid).toBe(DATASOURCE);
      expect(panel.gridPos.x + panel.gridPos.w, panel.title).toBeLessThanOrEqual(24);
    }
    const cells = new Set<string>();
    for (const { gridPos: g, title } of dashboard.panels)
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `${title} overlaps at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
  });

  it('reads only the names /metrics serves, each as its type allows', () => {
    const served = new Set<string>(Object.values(METRIC));
    for (const expr of exprs) {
      const names = expr.match(/\bratchet_[a-z_]+/g) ?? [];
      expect(names.length, expr).toBeGreaterThan(0);
      for (const name of names) {
        const base = name.replace(/_(bucket|count|sum)$/, '');
        expect(served.has(base) || served.has(name), `${name} in ${expr}`).toBe(true);
        if (HISTOGRAMS.has(base)) expect(name, expr).toMatch(/_bucket$/);
        if (name.endsWith('_total')) expect(expr, 'a counter is read as a rate').toMatch(new RegExp(`rate\\(${name}\\b`));
      }
    }
  });

  it('takes the database’s gauges with max, never a sum across instances', () => {
    for (const expr of exprs)
      for (const gauge of Object.keys(GAUGES))
        if (expr.includes(`${gauge}{`))
          expect(expr, `${gauge} is every instance's same value`).toMatch(new RegExp(`max by \\([^)]*\\) \\(${gauge}\\{`));
  });

  it('shows what an operator watches: deliveries by decision, webhook latency, effect lag, effects retrying and dead-lettered, open operations by state, the oldest open job', () => {
    const shows = (pattern: RegExp) => exprs.some((expr) => pattern.test(expr));
    expect(shows(/sum by \(decision\) \(rate\(ratchet_webhook_deliveries_total/)).toBe(true);
    expect(shows(/histogram_quantile\(0\.95, sum by \(le\) \(rate\(ratchet_webhook_duration_seconds_bucket/)).toBe(true);
    expect(shows(/histogram_quantile\(0\.95, sum by \(le, sink\) \(rate\(ratchet_effect_lag_seconds_bucket/)).toBe(true);
    expect(shows(/ratchet_effects_retrying/) && shows(/ratchet_effects_dead_lettered/)).toBe(true);
    expect(shows(/sum by \(state\) .*ratchet_operations\{[^}]*state=~"tracked\|PENDING\|RUNNING\|REQUIRES_ACTION"/)).toBe(true);
    expect(shows(/max by \(provider, kind\) \(ratchet_oldest_open_operation_age_seconds/)).toBe(true);
    expect(shows(/sum by \(provider, outcome\) \(rate\(ratchet_reconcile_polls_total/)).toBe(true);
  });

  it('filters every metric labelled by kind by the provider chosen (all of them at first), its values the providers the data holds', () => {
    const provider = dashboard.templating.list.find((variable) => variable.name === 'provider');
    expect(provider).toMatchObject({ query: { query: 'label_values(ratchet_operations, provider)' }, includeAll: true, allValue: '.*' });
    const byKind = [METRIC.operations, METRIC.oldestOpen, METRIC.overdue, METRIC.polls];
    let filtered = 0;
    for (const expr of exprs)
      for (const name of byKind)
        for (const [selector] of expr.matchAll(new RegExp(`${name}\\{[^}]*\\}`, 'g'))) {
          expect(selector, expr).toContain('provider=~"$provider"');
          filtered++;
        }
    expect(filtered).toBeGreaterThanOrEqual(byKind.length);
  });
});
