/**
 * docs/grafana/ratchet.png: the dashboard's own panels and queries
 * (ratchet.json), evaluated by a real Prometheus (Debian's `prometheus`)
 * scraping a real `ratchet start` under a few minutes of traffic, and drawn
 * with uPlot (the chart library Grafana's time series use) in headless
 * Chromium. Grafana itself is not installable on these machines; import
 * ratchet.json into yours for the real thing.
 *
 * usage: node --import tsx docs/grafana/screenshot.ts [--minutes N]
 */

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { FakeGemini } from '../../local/fake-gemini.ts';
import { envelope, newSecret, signedDelivery } from '../../test/support/deliveries.ts';
import { freePort } from '../../test/support/postgres.ts';
import { startRatchet } from '../../test/support/ratchet-process.ts';
import { Receiver } from '../../test/support/receiver.ts';

const args = process.argv.slice(2);
if (args.includes('--help') || (args.length > 0 && !(args[0] === '--minutes' && /^\d+$/.test(args[1] ?? '')))) {
  console.log('usage: node --import tsx docs/grafana/screenshot.ts [--minutes N]');
  process.exit(args.includes('--help') ? 0 : 2);
}
const minutes = Number(args[1] ?? 4);
const here = import.meta.dirname;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const work = mkdtempSync(join(tmpdir(), 'ratchet-screenshot-'));
const inbound = newSecret();
const outbound = newSecret();
const receiver = await new Receiver(outbound).start();
const gemini = await new FakeGemini().start();
const ratchet = await startRatchet({
  DATA_DIR: join(work, 'data'),
  WEBHOOK_SIGNING_SECRETS: inbound,
  EFFECTS_WEBHOOK_URL: receiver.url,
  EFFECTS_SIGNING_SECRET: outbound,
  EFFECTS_RETRY_BASE_MS: '2000',
  EFFECTS_RETRY_MAX_MS: '10000',
  EFFECTS_RETRY_FOR_SECONDS: '60',
  GEMINI_API_KEY: gemini.apiKey,
  GEMINI_BASE_URL: gemini.baseUrl,
  RECONCILE_INTERVAL_SECONDS: '5',
  OVERDUE_AFTER: 'batch=90s',
});
const promPort = await freePort();
const target = new URL(ratchet.url).host;
writeFileSync(
  join(work, 'prometheus.yml'),
  `global: {scrape_interval: 2s}\nscrape_configs:\n  - job_name: ratchet\n    authorization: {type: Bearer, credentials: ${ratchet.apiToken}}\n    static_configs: [{targets: ['${target}']}]\n`,
);
const prometheus = spawn(
  'prometheus',
  [
    `--config.file=${join(work, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(work, 'tsdb')}`,
    `--web.listen-address=127.0.0.1:${promPort}`,
  ],
  { stdio: 'ignore' },
);

try {
  const started = Date.now();
  const end = started + minutes * 60_000;
  const post = (payload: unknown, secret = inbound) => {
    const { body, headers } = signedDelivery(secret, payload);
    return fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers });
  };
  const types = ['batch.succeeded', 'batch.failed', 'batch.cancelled', 'batch.expired'];
  // A receiver outage a third of the way in (effects retry, lag grows), and a few effects it refuses for good (dead letters).
  receiver.refuseOnly = (name) => name.includes('-refused-');
  receiver.mode = 'gone';
  for (let i = 0; Date.now() < end; i++) {
    const t = (Date.now() - started) / (end - started);
    if (t > 0.35 && t < 0.5) {
      receiver.refuseOnly = undefined;
      receiver.mode = 'fail';
    } else {
      receiver.refuseOnly = (name) => name.includes('-refused-');
      receiver.mode = 'gone';
    }
    const id = `shot-${i % 97 === 0 ? 'refused-' : ''}${i}`;
    const type = types[i % 11 === 0 ? 1 + (i % 3) : 0] as string;
    await post(envelope(type, { id }));
    if (i % 5 === 0) await post(envelope(type, { id })); // a redelivery: a duplicate
    if (i % 40 === 0) await post(envelope('batch.succeeded', { id }), newSecret()); // a stranger's signature: 401
    if (i % 8 === 0) {
      // A job tracked and left running at Gemini: open, polled, and past 90 s overdue.
      const name = `batches/open-${i}`;
      gemini.batches.set(name, {
        state: 'BATCH_STATE_RUNNING',
        createTime: new Date().toISOString(),
        updateTime: new Date().toISOString(),
      });
      await ratchet.api('/operations', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name }) });
    }
    await sleep(40 + 60 * Math.abs(Math.sin(i / 200)));
  }
  await sleep(6_000);

  // Each panel's queries over the run, as Grafana would ask them (all instances, a 30 s rate window).
  const dashboard = JSON.parse(readFileSync(join(here, 'ratchet.json'), 'utf8'));
  const startS = Math.floor(started / 1000);
  const endS = Math.floor(Date.now() / 1000);
  const panels = [];
  for (const panel of dashboard.panels) {
    const series = [];
    for (const target of panel.targets) {
      const query = target.expr.replaceAll('$instance', '.*').replaceAll('$__rate_interval', '30s');
      const url = `http://127.0.0.1:${promPort}/api/v1/query_range?query=${encodeURIComponent(query)}&start=${startS}&end=${endS}&step=5`;
      const answer = (await (await fetch(url)).json()) as {
        status: string;
        error?: string;
        data: { result: Array<{ metric: Record<string, string>; values: Array<[number, string]> }> };
      };
      if (answer.status !== 'success') throw new Error(`${panel.title}: ${query}: ${answer.error}`);
      for (const result of answer.data.result)
        series.push({
          label: target.legendFormat.replace(/\{\{(\w+)\}\}/g, (_: string, key: string) => result.metric[key] ?? ''),
          values: result.values.map(([at, value]) => [at, Number(value)]),
        });
    }
    if (series.length === 0) throw new Error(`${panel.title}: no data from Prometheus (is it scraping ${target}?)`);
    panels.push({ title: panel.title, type: panel.type, gridPos: panel.gridPos, unit: panel.fieldConfig.defaults.unit, series });
  }
  const uplot = readFileSync(join(here, '../../node_modules/uplot/dist/uPlot.iife.min.js'), 'utf8');
  const uplotCss = readFileSync(join(here, '../../node_modules/uplot/dist/uPlot.min.css'), 'utf8');
  const html = `<!doctype html><html><head><style>${uplotCss}
body{margin:0;background:#111217;color:#ccccdc;font:13px Inter,Helvetica,Arial,sans-serif}
h1{font-size:17px;font-weight:500;margin:10px 16px}
.grid{position:relative;margin:0 8px}
.panel{position:absolute;background:#181b1f;border:1px solid #2c3235;border-radius:2px;box-sizing:border-box;padding:6px 8px}
.panel h2{font-size:13px;font-weight:500;margin:0 0 4px}
.stat{font-size:52px;font-weight:500;text-align:center;margin-top:40px}
.u-legend{font-size:11px;color:#ccccdc}.u-axis{color:#ccccdc}
</style><script>${uplot}</script></head><body><h1>Ratchet &nbsp;<span style="color:#8e8e8e;font-size:13px">${minutes} minutes of traffic · Prometheus ${new Date(started).toISOString().slice(0, 16)}Z</span></h1><div class="grid" id="grid"></div>
<script>
const panels = ${JSON.stringify(panels)};
const W = 1600 / 24, H = 30, colors = ['#73bf69','#f2cc0c','#8ab8ff','#ff780a','#f2495c','#5794f2','#b877d9','#fade2a','#ff9830'];
const fmt = (unit) => (u, vals) => vals.map((v) => v == null ? '' : unit === 's' ? (v < 1 ? (v * 1000).toFixed(0) + ' ms' : v.toFixed(1) + ' s') : unit === 'reqps' ? v.toFixed(1) + '/s' : String(Math.round(v * 10) / 10));
for (const p of panels) {
  const el = document.createElement('div'); el.className = 'panel';
  Object.assign(el.style, { left: p.gridPos.x * W + 'px', top: p.gridPos.y * H + 'px', width: p.gridPos.w * W - 6 + 'px', height: p.gridPos.h * H - 6 + 'px' });
  el.innerHTML = '<h2>' + p.title + '</h2>'; document.getElementById('grid').append(el);
  if (p.type === 'stat') { const last = p.series[0]?.values.at(-1)?.[1] ?? 0; el.innerHTML += '<div class="stat" style="color:' + (last > 0 ? '#f2495c' : '#73bf69') + '">' + last + '</div>'; continue; }
  const times = [...new Set(p.series.flatMap((s) => s.values.map((v) => v[0])))].sort((a, b) => a - b);
  const data = [times, ...p.series.map((s) => { const m = new Map(s.values); return times.map((t) => m.has(t) && Number.isFinite(m.get(t)) ? m.get(t) : null); })];
  new uPlot({ width: p.gridPos.w * W - 24, height: p.gridPos.h * H - 80, axes: [{ stroke: '#ccccdc', grid: { stroke: '#2c3235' } }, { stroke: '#ccccdc', grid: { stroke: '#2c3235' }, values: fmt(p.unit), size: 60 }],
    series: [{}, ...p.series.map((s, i) => ({ label: s.label, stroke: colors[i % colors.length], width: 1.5, fill: colors[i % colors.length] + '22', value: (u, v) => fmt(p.unit)(u, [v])[0] }))] }, data, el);
}
</script></body></html>`;
  writeFileSync(join(work, 'dashboard.html'), html);
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox'] });
  const page = await browser.newPage({ viewport: { width: 1620, height: 1020 } });
  await page.goto(`file://${join(work, 'dashboard.html')}`);
  await page.waitForTimeout(500);
  await page.screenshot({ path: join(here, 'ratchet.png') });
  await browser.close();
  console.log(`wrote ${join(here, 'ratchet.png')}`);
} finally {
  prometheus.kill();
  await ratchet.stop();
  await receiver.stop();
  await gemini.stop();
  rmSync(work, { recursive: true, force: true });
}
