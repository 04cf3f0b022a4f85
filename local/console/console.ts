/**
 * The local console: plain server-rendered HTML, no framework, no CDN, no
 * script but the one redrive button's fetch (same origin, JSON, so the API's
 * cross-site guard admits it).
 *
 *   GET /                           operations, newest first, filtered by state and kind
 *   GET /console/operations/{name}  one operation: its timeline (history) and its effects
 */
import type { Hono } from 'hono';
import { OPERATION_KINDS, OPERATION_STATES } from '../../lambda/core/lifecycle.ts';
import { normalizeOperationName } from '../../lambda/core/names.ts';
import type { DeadLetters } from '../../lambda/effects/dead-letters.ts';
import type { EffectLedger } from '../../lambda/effects/ledger.ts';
import type { HistoryEntry, HistoryLog } from '../../lambda/history/history.ts';
import type { OperationQueries } from '../../lambda/store/operation-store.ts';
import type { SqliteEffectsQueue } from '../engine/effects-queue.ts';

export interface ConsoleDeps {
  queries: OperationQueries;
  history: Pick<HistoryLog, 'list'>;
  effects: () => { deadLetters: DeadLetters; queue: Pick<SqliteEffectsQueue, 'pending'>; ledger: EffectLedger } | undefined;
}

const escapeHtml = (value: unknown) =>
  String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)} · Ratchet</title>
<style>body{font:14px system-ui,sans-serif;margin:2rem;color:#222}table{border-collapse:collapse}td,th{padding:.3rem .6rem;border-bottom:1px solid #ddd;text-align:left}
.SUCCEEDED{color:#176f2c}.FAILED,.EXPIRED,.dead-lettered{color:#b00020}.RUNNING,.REQUIRES_ACTION,.retrying{color:#8a5a00}code{font-size:13px}</style>
</head><body><h1><a href="/">Ratchet</a> · ${escapeHtml(title)}</h1>${body}</body></html>`;
}

const options = (values: readonly string[], selected: string | undefined) =>
  ['', ...values].map((v) => `<option value="${v}"${v === (selected ?? '') ? ' selected' : ''}>${v || 'any'}</option>`).join('');

export function consoleRoutes(app: Hono, deps: ConsoleDeps): void {
  app.get('/', async (c) => {
    const state = OPERATION_STATES.find((s) => s === c.req.query('state'));
    const kind = OPERATION_KINDS.find((k) => k === c.req.query('kind'));
    const { operations, nextCursor } = await deps.queries.list({ state, kind, limit: 100, cursor: c.req.query('cursor') || undefined });
    const rows = operations
      .map(
        (
          o,
        ) => `<tr data-name="${escapeHtml(o.name)}"><td><a href="/console/operations/${escapeHtml(o.name)}">${escapeHtml(o.name)}</a></td><td>${o.kind}</td>
<td class="${escapeHtml(o.state)}">${escapeHtml(o.state ?? 'tracked')}</td><td>${o.version}</td><td>${escapeHtml(o.recordedAt)}</td><td>${escapeHtml(o.polling.note ?? (o.polling.nextPollAt ? `next poll ${o.polling.nextPollAt}` : ''))}</td></tr>`,
      )
      .join('');
    const filter = `<form method="get">state <select name="state">${options(OPERATION_STATES, state)}</select>
kind <select name="kind">${options(OPERATION_KINDS, kind)}</select> <button>filter</button></form>`;
    const more = nextCursor
      ? `<p><a href="/?${new URLSearchParams({ ...(state && { state }), ...(kind && { kind }), cursor: nextCursor })}">older</a></p>`
      : '';
    const table = operations.length
      ? `<table><thead><tr><th>operation</th><th>kind</th><th>state</th><th>version</th><th>recorded</th><th>polling</th></tr></thead><tbody>${rows}</tbody></table>`
      : '<p>No operations yet: send a webhook (<code>npm run webhook</code>) or track one (<code>POST /operations</code>).</p>';
    return c.html(page('operations', filter + table + more));
  });

  app.get('/console/operations/:name{.+}', async (c) => {
    let name: string;
    try {
      name = normalizeOperationName(c.req.param('name'));
    } catch (error) {
      return c.html(page('not an operation', `<p>${escapeHtml((error as Error).message)}</p>`), 400);
    }
    const record = await deps.queries.describe(name);
    if (!record) return c.html(page('unknown', `<p>No operation named <code>${escapeHtml(name)}</code>.</p>`), 404);
    const history = await deps.history.list(name);
    const timeline = history
      .map(
        (
          e,
        ) => `<tr><td>${e.version}</td><td>${escapeHtml(e.recordedAt)}</td><td class="${escapeHtml(e.state)}">${escapeHtml(e.previousState ?? '–')} → ${escapeHtml(e.state ?? 'tracked')}</td>
<td>${e.stateChanged ? 'state change' : e.source === 'track' ? 'tracked' : 'refresh'}</td><td>${escapeHtml(e.source)}</td><td><code>${escapeHtml(e.eventId)}</code></td><td>${escapeHtml(e.updateTime)}</td></tr>`,
      )
      .join('');
    const body = `<p class="${escapeHtml(record.state)}"><strong>${escapeHtml(record.state ?? 'tracked')}</strong>, version ${record.version}${record.polling.note ? `; polling: ${escapeHtml(record.polling.note)}` : ''}</p>
<h2>Timeline</h2><table id="timeline"><thead><tr><th>version</th><th>recorded</th><th>state</th><th>write</th><th>source</th><th>event</th><th>event time</th></tr></thead><tbody>${timeline}</tbody></table>
<h2>Effects</h2>${await effectsTable(deps, name, history)}`;
    return c.html(page(name, body));
  });
}

async function effectsTable(deps: ConsoleDeps, name: string, history: HistoryEntry[]): Promise<string> {
  const effects = deps.effects();
  if (!effects) return '<p>The outbound sink is off (<code>EFFECTS_WEBHOOK_URL</code> is not set).</p>';
  const dead = (await effects.deadLetters.list()).filter((letter) => letter.name === name);
  const pending = effects.queue.pending(name);
  const rows: string[] = [];
  for (const entry of history.filter((e) => e.stateChanged)) {
    const key = `${name}#${entry.version}`;
    const letter = dead.find((d) => d.version === entry.version);
    const waiting = pending.find((p) => p.version === entry.version);
    let status: string;
    if (letter)
      status = `<span class="dead-lettered">dead-lettered</span> (${escapeHtml(letter.reason)}: ${escapeHtml(letter.lastError)}, ${letter.attempts} attempts)`;
    else if (await effects.ledger.isDelivered('webhook', key)) status = 'delivered';
    else if (waiting && waiting.receiveCount > 0)
      status = `<span class="retrying">retrying</span> (attempt ${waiting.receiveCount}, next ${waiting.retryAt ? new Date(waiting.retryAt).toISOString() : 'now'})`;
    else status = 'queued';
    rows.push(
      `<tr><td><code>${escapeHtml(key)}</code></td><td class="${escapeHtml(entry.state)}">${escapeHtml(entry.state)}</td><td>${status}</td></tr>`,
    );
  }
  const redrive = dead.length
    ? `<p><button id="redrive" onclick="fetch('/effects/redrive',{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify({name:${escapeHtml(JSON.stringify(name))}})}).then(r=>r.json()).then(r=>{this.textContent='redriven: '+JSON.stringify(r);})">redrive</button></p>`
    : '';
  return rows.length
    ? `<table id="effects"><thead><tr><th>effect</th><th>state</th><th>delivery</th></tr></thead><tbody>${rows.join('')}</tbody></table>${redrive}`
    : '<p>No state change yet.</p>';
}
