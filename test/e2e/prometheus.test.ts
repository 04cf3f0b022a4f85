/**
 * The dashboard and the alert rules (docs/grafana) against a real Prometheus
 * (Debian's) scraping a real `ratchet start` with its API token: promtool
 * accepts the rules; after real traffic (applied, duplicates, a stranger's
 * signature, an effect the receiver refuses for good, a job left running and
 * polled) every panel's query answers with a number (the provider variable
 * offering the providers the data holds), every rule evaluates
 * without error, and the dead-letter alert fires: Prometheus evaluates a copy
 * of the rules whose `for:` is a second, so "firing" is reached within the
 * test and not only "pending".
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { FakeGemini } from '../support/fake-gemini.ts';
import { freePort } from '../support/postgres.ts';
import { PROJECT_ROOT, type RatchetProcess, startRatchet } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const PROMETHEUS = '/usr/bin/prometheus';
const PROMTOOL = '/usr/bin/promtool';
const ALERTS = join(PROJECT_ROOT, 'docs/grafana/alerts.yml');
const RULES = 8;

interface Answer<T> {
  status: string;
  error?: string;
  data: T;
}

describe('the dashboard and alert rules on a real Prometheus', () => {
  const inbound = newSecret();
  const outbound = newSecret();
  const work = mkdtempSync(join(tmpdir(), 'ratchet-prometheus-'));
  let receiver: Receiver;
  let gemini: FakeGemini;
  let ratchet: RatchetProcess;
  let prometheus: ChildProcess | undefined;
  let api = '';
  const ask = async <T>(path: string): Promise<T> => {
    const answer = (await (await fetch(`${api}${path}`)).json()) as Answer<T>;
    if (answer.status !== 'success') throw new Error(`${path}: ${answer.error}`);
    return answer.data;
  };
  /** An instant query's samples. */
  const query = async (promql: string) =>
    (await ask<{ result: Array<{ value: [number, string] }> }>(`/api/v1/query?query=${encodeURIComponent(promql)}`)).result;
  /** The numbers among an instant query's samples: a NaN (a quantile or ratio of nothing) is no data. */
  const numbers = async (promql: string) =>
    (await query(promql)).map(({ value }) => Number(value[1])).filter((value) => !Number.isNaN(value));

  beforeAll(async () => {
    for (const bin of [PROMETHEUS, PROMTOOL])
      if (!existsSync(bin)) throw new Error(`${bin} is missing: apt-get install prometheus (.ci/run does)`);
    receiver = await new Receiver(outbound).start();
    receiver.refuseOnly = (name) => name.includes('refused');
    receiver.mode = 'gone';
    gemini = await new FakeGemini().start();
    ratchet = await startRatchet({
      DATA_DIR: join(work, 'data'),
      WEBHOOK_SIGNING_SECRETS: inbound,
      EFFECTS_WEBHOOK_URL: receiver.url,
      EFFECTS_SIGNING_SECRET: outbound,
      GEMINI_API_KEY: gemini.apiKey,
      GEMINI_BASE_URL: gemini.baseUrl,
      RECONCILE_INTERVAL_SECONDS: '1',
    });
    // The rules as written, but held a second rather than minutes (promtool checks the file itself, below).
    const rules = readFileSync(ALERTS, 'utf8');
    const shortened = rules.replace(/^(\s+for:) \S+$/gm, '$1 1s');
    expect(shortened.match(/^\s+for: 1s$/gm)).toHaveLength(RULES);
    writeFileSync(join(work, 'alerts.yml'), shortened);
    const port = await freePort();
    api = `http://127.0.0.1:${port}`;
    const target = new URL(ratchet.url);
    writeFileSync(
      join(work, 'prometheus.yml'),
      [
        'global: {scrape_interval: 1s, evaluation_interval: 1s}',
        `rule_files: ['${join(work, 'alerts.yml')}']`,
        'scrape_configs:',
        '  - job_name: ratchet',
        `    authorization: {type: Bearer, credentials: ${ratchet.apiToken}}`,
        `    static_configs: [{targets: ['${target.host}']}]`,
        '',
      ].join('\n'),
    );
    prometheus = spawn(
      PROMETHEUS,
      [
        `--config.file=${join(work, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(work, 'tsdb')}`,
        `--web.listen-address=127.0.0.1:${port}`,
      ],
      { stdio: 'ignore' },
    );
    await eventually(async () => (await fetch(`${api}/-/ready`).catch(() => undefined))?.status === 200, 20_000, 'Prometheus ready');
  }, 60_000);
  afterAll(async () => {
    prometheus?.kill();
    await ratchet?.stop();
    await receiver?.stop();
    await gemini?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('promtool accepts the alert rules', () => {
    expect(execFileSync(PROMTOOL, ['check', 'rules', ALERTS]).toString()).toMatch(new RegExp(`SUCCESS: ${RULES} rules found`));
  });

  it('after real traffic, answers every panel’s query with a number, evaluates every rule, and fires the dead-letter alert', async () => {
    const post = (payload: unknown, secret = inbound) => {
      const { body, headers } = signedDelivery(secret, payload);
      return fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers });
    };
    for (let i = 0; i < 6; i++) {
      const delivery = envelope(i === 5 ? 'batch.failed' : 'batch.succeeded', { id: `prom-${i}` });
      expect((await post(delivery)).status).toBe(200);
      expect((await post(delivery)).status).toBe(200);
    }
    expect((await post(envelope('batch.succeeded', { id: 'prom-refused' }))).status).toBe(200);
    expect((await post(envelope('batch.succeeded', { id: 'prom-x' }), newSecret())).status).toBe(401);
    gemini.batches.set('batches/prom-open', { state: 'BATCH_STATE_RUNNING', updateTime: new Date().toISOString() });
    await ratchet.api('/operations', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"batches/prom-open"}',
    });
    const panelsAnswer = async () => {
      const dashboard = JSON.parse(readFileSync(join(PROJECT_ROOT, 'docs/grafana/ratchet.json'), 'utf8')) as {
        panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
      };
      for (const panel of dashboard.panels)
        for (const { expr } of panel.targets) {
          const promql = expr.replaceAll('$instance', '.*').replaceAll('$provider', '.*').replaceAll('$__rate_interval', '20s');
          expect(await numbers(promql), `${panel.title}: ${promql}`).not.toEqual([]);
        }
    };
    // Scraped a few times since, so each rate has two samples in its window.
    let seen = '';
    await eventually(
      async () => {
        const [dead] = await query('max(ratchet_effects_dead_lettered)');
        const [polls] = await query('sum(increase(ratchet_reconcile_polls_total[20s]))');
        seen = `dead letters ${dead?.value[1]}, polls ${polls?.value[1]}`;
        return dead?.value[1] === '1' && Number(polls?.value[1] ?? 0) > 0;
      },
      30_000,
      'a dead letter and polls scraped',
    ).catch((error: Error) => {
      throw new Error(`${error.message}: ${seen}`);
    });
    // Traffic goes on while the panels are read, as in production: a rate over the last 20 s of no traffic is a
    // quantile of nothing (NaN), which is no data.
    let live = true;
    const flowing = (async () => {
      for (let i = 0; live; i++) {
        const delivery = envelope('batch.succeeded', { id: `prom-live-${i}` });
        expect((await post(delivery)).status).toBe(200);
        expect((await post(delivery)).status).toBe(200);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    try {
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      await panelsAnswer();
      // The dashboard's provider variable (label_values(ratchet_operations, provider)) has the providers to pick from.
      const providers = await ask<string[]>(`/api/v1/label/provider/values?${new URLSearchParams({ 'match[]': 'ratchet_operations' })}`);
      expect(providers).toEqual(['gemini']);
    } finally {
      live = false;
      await flowing;
    }

    let rules: Array<{ name: string; health: string; lastError?: string }> = [];
    let alerts: Array<{ labels: Record<string, string>; state: string; value: string }> = [];
    await eventually(
      async () => {
        const { groups } = await ask<{ groups: Array<{ rules: typeof rules }> }>('/api/v1/rules');
        rules = groups.flatMap((group) => group.rules);
        ({ alerts } = await ask<{ alerts: typeof alerts }>('/api/v1/alerts'));
        return (
          rules.length === RULES &&
          rules.every((rule) => rule.health === 'ok') &&
          alerts.some((alert) => alert.labels.alertname === 'RatchetEffectsDeadLettered' && alert.state === 'firing')
        );
      },
      10_000,
      'every rule evaluated, the dead-letter alert firing',
    ).catch((error: Error) => {
      throw new Error(`${error.message}: rules ${JSON.stringify(rules)}, alerts ${JSON.stringify(alerts)}`);
    });
    const fired = alerts.find((alert) => alert.labels.alertname === 'RatchetEffectsDeadLettered');
    expect(fired).toMatchObject({ state: 'firing', labels: { sink: 'webhook', severity: 'page' } });
    expect(Number(fired?.value)).toBe(1);
  });
});
