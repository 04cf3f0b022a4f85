/**
 * The local console: plain server-rendered HTML, no framework, nothing from
 * the internet, no script but view.ts's one (the redrive button's POST, with
 * the session's CSRF token; allowed by the page's CSP nonce). Behind the API
 * token like every route (local/access/guard.ts). Each page follows the
 * change stream from the moment it was rendered and updates its rows in
 * place (view.ts); `?refresh=N` reloads the whole page every N seconds.
 *
 *   GET /                           operations, open first, with counts per state, provider and kind as filter links
 *   GET /console/operations/{name}  one operation: every event it received (applied or refused, and why),
 *                                   each effect beside the write it came from, its polling status
 *   GET /console/unprocessable      authentic deliveries that could never be used (answered 200 all the same), newest first
 */
import type { Context, Hono } from 'hono';
import { APP_SINK } from '../../app/effects/app-sink.ts';
import type { DeadLetter } from '../../app/effects/dead-letters.ts';
import { type DeliveryAttempts, LEDGER_RETENTION_SECONDS } from '../../app/effects/ledger.ts';
import type { ConsoleEffects, ConsoleStore, OperationCounts, PendingEffectView } from '../../app/engine.ts';
import type { ChangeFeedPort } from '../../app/feed.ts';
import type { HistoryEntry, HistoryLog } from '../../app/history.ts';
import { type Decision, EFFECTS_FILTERS, type EffectsFilter, type OperationView, type UnprocessableLog } from '../../app/ports.ts';
import type { CredentialStatus } from '../../app/reconcile/credentials.ts';
import {
  isTerminal,
  OPERATION_KINDS,
  OPERATION_STATES,
  type OperationKind,
  type OperationState,
  PROVIDER_KINDS,
  PROVIDERS,
  type ProviderName,
  providerOf,
} from '../../core/lifecycle.ts';
import { normalizeOperationName } from '../../core/names.ts';
import { escapeHtml, live, page, pollingInWords, reasonInWords, shortTime, when } from './view.ts';

export interface ConsoleDeps {
  store: ConsoleStore;
  history: Pick<HistoryLog, 'list'>;
  effects: () => ConsoleEffects | undefined;
  /** Which engine this Ratchet runs on, and where (shown in the footer). */
  engine?: string;
  /** The change feed, whose stream keeps the pages live. */
  feed: Pick<ChangeFeedPort, 'headCursor'>;
  /** Whether reconcile polls here (a Gemini API key, or an Agent Platform project, is set). */
  reconcileOn: boolean;
  /** Authentic deliveries that could never be used. */
  unprocessable: Pick<UnprocessableLog, 'listUnprocessable'>;
  /** Whether Gemini takes each labelled API key (GEMINI_API_KEYS): a refused one is named above the list. */
  geminiKeys?: () => CredentialStatus[];
  /** Where the console is mounted (`/api/ratchet` inside an application; '' for ratchet start): every link starts with it. */
  basePath?: string;
}

const PAGE_SIZE = 100;
/** The sinks a delivery is kept under in the ledger: the outbound webhook's, and the application's onChange. */
const EFFECT_SINKS = ['webhook', APP_SINK] as const;

/**
 * `open`, `tracked` (nothing observed yet) or a state; `effects` selects operations with an effect the receiver
 * refused at least once and that waits to be tried again (`retrying`), or one set aside (`dead-lettered`).
 */
interface Filter {
  /** The mount's path, which every link of the list starts with (not part of the query). */
  base: string;
  state?: OperationState | 'open' | 'tracked';
  /** Only this provider's jobs (its kinds). */
  provider?: ProviderName;
  kind?: OperationKind;
  effects?: EffectsFilter;
  /** Only open jobs past their kind's limit (OVERDUE_AFTER). */
  overdue?: boolean;
  page: number;
  refresh?: number;
}

function filterOf(c: Context, base: string): Filter {
  const state = c.req.query('state');
  const refresh = Number(c.req.query('refresh'));
  return {
    base,
    state: state === 'open' || state === 'tracked' ? state : OPERATION_STATES.find((s) => s === state),
    provider: PROVIDERS.find((p) => p === c.req.query('provider')),
    kind: OPERATION_KINDS.find((k) => k === c.req.query('kind')),
    effects: EFFECTS_FILTERS.find((f) => f === c.req.query('effects')),
    ...(c.req.query('overdue') === 'true' && { overdue: true }),
    page: Math.max(0, Math.trunc(Number(c.req.query('page')) || 0)),
    ...(refresh >= 1 && refresh <= 3600 && { refresh: Math.trunc(refresh) }),
  };
}

function linkTo(filter: Filter, change: Partial<Filter>): string {
  const next = { ...filter, page: 0, ...change };
  const query = new URLSearchParams({
    ...(next.state && { state: next.state }),
    ...(next.provider && { provider: next.provider }),
    ...(next.kind && { kind: next.kind }),
    ...(next.effects && { effects: next.effects }),
    ...(next.overdue && { overdue: 'true' }),
    ...(next.page && { page: String(next.page) }),
    ...(next.refresh && { refresh: String(next.refresh) }),
  }).toString();
  return query ? `${next.base}/?${query}` : `${next.base}/`;
}

const refreshLink = (href: (refresh: number | undefined) => string, refresh: number | undefined) =>
  refresh ? `<a href="${href(undefined)}">stop refreshing</a>` : `<a href="${href(5)}">refresh every 5 s</a>`;

/** The change stream a page follows: from the feed's head when it was rendered, of one operation or of all. */
function streamFrom(base: string, head: string, name?: string): string {
  return `${base}/changes/stream?${new URLSearchParams({ after: head, ...(name && { name }) })}`;
}

export function consoleRoutes(app: Hono, deps: ConsoleDeps): void {
  const base = deps.basePath ?? '';
  /** A page with this answer's nonce and CSRF token, its links under the mount. */
  const render = (c: Context, title: string, body: string, refreshSeconds?: number) => renderPage(c, base, title, body, refreshSeconds);
  app.get('/', async (c) => {
    const now = Date.now();
    // Before anything is read: a change after it reaches the page through the stream.
    const head = await deps.feed.headCursor();
    const filter = filterOf(c, base);
    const effects = deps.effects();
    const deadLetters = effects ? await effects.deadLetters.list() : [];
    const deadNames = new Set(deadLetters.filter((letter) => letter.status !== 'redriving').map((letter) => letter.name));
    const retrying = new Set((await effects?.retrying()) ?? []);
    const counts = await deps.store.counts();
    const operations = await listOf(deps.store, counts, filter, {
      ...(filter.state === 'open' ? { open: true } : filter.state === 'tracked' ? { state: null } : { state: filter.state }),
      ...(filter.effects && { names: [...(filter.effects === 'dead-lettered' ? deadNames : retrying)] }),
      ...(filter.overdue && { overdue: true }),
      limit: PAGE_SIZE + 1,
      offset: filter.page * PAGE_SIZE,
    });
    const effectOf = (name: string) => (deadNames.has(name) ? 'dead-lettered' : retrying.has(name) ? 'retrying' : undefined);
    const rows = operations.slice(0, PAGE_SIZE).map((o) => operationRow(o, now, deps.reconcileOn, effectOf(o.name), base));
    const table = rows.length
      ? `<div class="scroll"><table id="operations"><thead><tr><th>operation</th><th class="wide">provider</th><th class="wide">kind</th><th>state</th>
<th class="wide">version</th><th>last write</th><th>polling</th><th>effects</th></tr></thead><tbody>${rows.join('')}</tbody></table></div>`
      : counts.length
        ? '<p>No operation matches this filter.</p>'
        : '<p>No operations yet: send a webhook (<code>npm run webhook</code>) or track one (<code>POST /operations</code>).</p>';
    const pages = [
      filter.page > 0 && `<a href="${linkTo(filter, { page: filter.page - 1 })}">newer</a>`,
      operations.length > PAGE_SIZE && `<a href="${linkTo(filter, { page: filter.page + 1 })}">more</a>`,
    ].filter(Boolean);
    const engine = deps.engine ? ` · <span id="engine">on ${escapeHtml(deps.engine)}</span>` : '';
    const footer = `<p>${pages.join(' · ')}${pages.length ? ' · ' : ''}${refreshLink((refresh) => linkTo(filter, { refresh, page: filter.page }), filter.refresh)}${engine}</p>`;
    const unusable = (await unprocessableNote(deps, now)) + refusedKeysNote(deps, now);
    return c.html(
      render(
        c,
        'operations',
        unusable +
          live(streamFrom(base, head), countsNav(counts, filter, { 'dead-lettered': deadNames.size, retrying: retrying.size }) + table) +
          footer,
        filter.refresh,
      ),
    );
  });

  app.get('/console/unprocessable', async (c) => {
    const now = Date.now();
    const { decisions } = await deps.unprocessable.listUnprocessable({ limit: PAGE_SIZE });
    const rows = decisions.map(
      (
        d,
      ) => `<tr><td>${when(d.receivedAt, now)}</td><td><code>${escapeHtml(d.webhookId)}</code><br><small>${escapeHtml(d.scheme)}</small></td>
<td class="wide">${escapeHtml(d.type ?? '–')}</td><td><span class="dead-lettered">${escapeHtml(d.reason)}</span> ${escapeHtml(d.detail)}</td>
<td><details><summary>body</summary><pre>${escapeHtml(d.body)}</pre></details></td></tr>`,
    );
    const body = rows.length
      ? `<p><small>Deliveries whose signature verified but whose content can never be used. Each was answered 200, so Gemini
does not retry it for a day and keeps the webhook on; none changed an operation. Kept 30 days, newest first (the last ${PAGE_SIZE}).
As JSON: <a href="${base}/decisions?outcome=unprocessable">${base}/decisions?outcome=unprocessable</a>.</small></p>
<div class="scroll"><table id="unprocessable"><thead><tr><th>received</th><th>webhook-id</th><th class="wide">type</th><th>why</th><th>first 4 KiB</th></tr></thead>
<tbody>${rows.join('')}</tbody></table></div>`
      : '<p>No unprocessable delivery in the last 30 days.</p>';
    return c.html(render(c, 'unprocessable deliveries', `${body}<p><a href="${base}/">all operations</a></p>`));
  });

  app.get('/console/operations/:name{.+}', async (c) => {
    let name: string;
    try {
      name = normalizeOperationName(c.req.param('name'));
    } catch (error) {
      return c.html(render(c, 'not an operation', `<p>${escapeHtml((error as Error).message)}</p>`), 400);
    }
    const head = await deps.feed.headCursor();
    const view = await deps.store.describe(name);
    if (!view) return c.html(render(c, 'unknown', `<p>No operation named <code>${escapeHtml(name)}</code>.</p>`), 404);
    const now = Date.now();
    const { refresh } = filterOf(c, base);
    const here = (r: number | undefined) => `${base}/console/operations/${escapeHtml(name)}${r ? `?refresh=${r}` : ''}`;
    const summary = `<p><strong class="${escapeHtml(view.state)}">${escapeHtml(view.state ?? 'tracked')}</strong>${overdueFlag(view, now)} · ${providerOf(view.kind)} · ${view.kind} · version ${view.version}
· last write ${when(view.recordedAt, now)} · first seen ${when(view.createdAt, now)}</p>
<p id="polling">Polling: ${pollingInWords(view, now, deps.reconcileOn)}</p>${
      view.userMetadata ? `\n<p id="metadata">Metadata: <code>${escapeHtml(JSON.stringify(view.userMetadata))}</code></p>` : ''
    }${resultInWords(view)}${view.credential ? `\n<p id="credential">Polled with the key labelled <code>${escapeHtml(view.credential)}</code></p>` : ''}`;
    const body = `${live(
      streamFrom(base, head, name),
      `${summary}<h2>Timeline</h2>
<p><small>Every event this operation received, oldest first: applied writes, and refused events greyed with the reason.</small></p>
${await timeline(deps, view, now)}`,
    )}<p>${refreshLink(here, refresh)} · <a href="${base}/operations/${escapeHtml(name)}/decisions">decisions as JSON</a></p>`;
    return c.html(render(c, name, body, refresh));
  });
}

/** A warning above the list while Gemini refuses one of the labelled keys: its jobs are not polled meanwhile. */
function refusedKeysNote(deps: ConsoleDeps, now: number): string {
  const refused = (deps.geminiKeys?.() ?? []).filter((key) => key.state === 'refused');
  if (refused.length === 0) return '';
  const keys = refused.map(
    (key) => `<code>${escapeHtml(key.label || 'GEMINI_API_KEY')}</code> (answered ${key.status}${key.at ? `, ${when(key.at, now)}` : ''})`,
  );
  return `<p id="gemini-keys-note" class="warning"><span class="dead-lettered">Gemini refuses the API key${refused.length > 1 ? 's' : ''}</span>
${keys.join(', ')}: the jobs polled with ${refused.length > 1 ? 'them' : 'it'} are not followed until it is replaced (GEMINI_API_KEYS).</p>`;
}

/** What the job came to and what it cost: its output (or files), its request counts or tokens, a File Search response, a tuned model. */
function resultInWords(view: OperationView): string {
  const result = view.result;
  if (!result) return '';
  const lines: string[] = [];
  if (result.outputUri) lines.push(`Output: <code>${escapeHtml(result.outputUri)}</code>`);
  if (result.tunedModel?.model) lines.push(`Tuned model: <code>${escapeHtml(result.tunedModel.model)}</code>`);
  if (result.batchStats) {
    const s = result.batchStats;
    const parts = [
      s.requestCount !== undefined && `${s.requestCount} requests`,
      s.successfulRequestCount !== undefined && `${s.successfulRequestCount} succeeded`,
      s.failedRequestCount !== undefined && `${s.failedRequestCount} failed`,
      s.pendingRequestCount !== undefined && `${s.pendingRequestCount} pending`,
    ].filter(Boolean);
    lines.push(`<span id="cost">Cost: ${escapeHtml(parts.join(', '))}</span>`);
  }
  if (result.usage) {
    const u = result.usage;
    const parts = [
      u.inputTokens !== undefined && `${u.inputTokens} input`,
      u.outputTokens !== undefined && `${u.outputTokens} output`,
      u.totalTokens !== undefined && `${u.totalTokens} total tokens`,
    ].filter(Boolean);
    lines.push(`<span id="cost">Cost: ${escapeHtml(parts.join(', '))}</span>`);
  }
  if (result.requestCounts) {
    const c = result.requestCounts;
    const parts = (['total', 'succeeded', 'failed', 'canceled', 'expired'] as const).flatMap((count) =>
      c[count] === undefined ? [] : [count === 'total' ? `${c[count]} requests` : `${c[count]} ${count}`],
    );
    lines.push(`<span id="cost">Cost: ${escapeHtml(parts.join(', '))}</span>`);
  }
  if (result.outputFileId) lines.push(`Output file: <code>${escapeHtml(result.outputFileId)}</code>`);
  if (result.errorFileId) lines.push(`Error file: <code>${escapeHtml(result.errorFileId)}</code>`);
  if (result.fineTunedModel) lines.push(`Fine-tuned model: <code>${escapeHtml(result.fineTunedModel)}</code>`);
  if (result.response) lines.push(`Response: <code>${escapeHtml(JSON.stringify(result.response))}</code>`);
  if (result.error) lines.push(`Error: ${escapeHtml([result.error.status, result.error.message].filter(Boolean).join(': '))}`);
  return lines.length ? `\n<p id="result">${lines.join('<br>')}</p>` : '';
}

/** A warning above the list while any authentic delivery could not be used (the last 30 days). */
async function unprocessableNote(deps: ConsoleDeps, now: number): Promise<string> {
  const { decisions, nextCursor } = await deps.unprocessable.listUnprocessable({ limit: PAGE_SIZE });
  const last = decisions[0];
  if (!last) return '';
  const count = `${decisions.length}${nextCursor ? '+' : ''}`;
  return `<p id="unprocessable-note" class="warning"><a href="${deps.basePath ?? ''}/console/unprocessable"><span class="dead-lettered">${count} unprocessable
deliver${decisions.length === 1 ? 'y' : 'ies'}</span></a>: authentic, answered 200, never applied; the last ${when(last.receivedAt, now)}
(${escapeHtml(last.reason)}).</p>`;
}

/** A page with this answer's CSP nonce and the session's CSRF token (local/access/guard.ts sets both). */
function renderPage(c: Context, basePath: string, title: string, body: string, refreshSeconds?: number): string {
  return page(title, body, {
    basePath,
    ...(c.req.query('part') === 'live' && { part: 'live' as const }),
    ...(refreshSeconds && { refreshSeconds }),
    nonce: c.get('secureHeadersNonce' as never) as string | undefined,
    csrf: c.get('csrfToken' as never) as string | undefined,
  });
}

function operationRow(o: OperationView, now: number, reconcileOn: boolean, effects: EffectsFilter | undefined, base: string): string {
  const status = isTerminal(o.state) ? 'done' : 'open';
  return `<tr data-name="${escapeHtml(o.name)}" class="${status}"><td><a href="${base}/console/operations/${escapeHtml(o.name)}">${escapeHtml(o.name)}</a></td>
<td class="wide provider">${providerOf(o.kind)}</td><td class="wide">${o.kind}</td><td class="${escapeHtml(o.state)}">${escapeHtml(o.state ?? 'tracked')}${overdueFlag(o, now)}</td><td class="wide">${o.version}</td>
<td>${when(o.recordedAt, now)}</td><td>${pollingInWords(o, now, reconcileOn)}</td>
<td>${effects ? `<span class="${effects}">${effects}</span>` : ''}</td></tr>`;
}

/** ` overdue (open 27 h)` beside an open job past its kind's limit. */
function overdueFlag(o: OperationView, now: number): string {
  if (!o.overdue || isTerminal(o.state)) return '';
  return ` <span class="retrying overdue" title="open past its kind's limit of ${duration(o.overdue.afterSeconds)} (OVERDUE_AFTER)">overdue</span> <small>open ${duration((now - Date.parse(o.createdAt)) / 1000)}</small>`;
}

/** Seconds in the largest whole unit: `90 s`, `45 min`, `27 h`, `3 d`. */
function duration(seconds: number): string {
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7_200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172_800) return `${Math.round(seconds / 3_600)} h`;
  return `${Math.round(seconds / 86_400)} d`;
}

/**
 * The list's page: the store's list, and for a provider with no kind chosen the lists of its kinds that have jobs
 * (the store filters by one kind) merged in the store's order (open first, then the newest), this page cut from them.
 */
export async function listOf(
  store: ConsoleStore,
  counts: OperationCounts[],
  filter: Pick<Filter, 'provider' | 'kind'>,
  query: Omit<Parameters<ConsoleStore['consoleList']>[0], 'kind'>,
): Promise<OperationView[]> {
  if (filter.kind && filter.provider && providerOf(filter.kind) !== filter.provider) return [];
  if (filter.kind || !filter.provider) return store.consoleList({ ...query, kind: filter.kind });
  const kinds = PROVIDER_KINDS[filter.provider].filter((kind) => counts.some((row) => row.kind === kind));
  const lists = await Promise.all(kinds.map((kind) => store.consoleList({ ...query, kind, limit: query.offset + query.limit, offset: 0 })));
  const rank = (o: OperationView) => (isTerminal(o.state) ? 1 : 0);
  return lists
    .flat()
    .sort((a, b) => rank(a) - rank(b) || compare(b.recordedAt, a.recordedAt) || compare(b.name, a.name))
    .slice(query.offset, query.offset + query.limit);
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Counts per state, per provider and per kind, each a link that filters the list (the other filters kept). */
function countsNav(counts: OperationCounts[], filter: Filter, troubled: Record<EffectsFilter, number>): string {
  const overdueCount = counts.reduce((total, row) => total + row.overdue, 0);
  const sum = (rows: typeof counts) => rows.reduce((total, row) => total + row.count, 0);
  const ofProvider = (row: OperationCounts) => !filter.provider || providerOf(row.kind) === filter.provider;
  const inKind = counts.filter((row) => ofProvider(row) && (!filter.kind || row.kind === filter.kind));
  const inState = counts.filter((row) =>
    filter.state === 'open'
      ? !isTerminal(row.state)
      : filter.state === 'tracked'
        ? row.state === null
        : !filter.state || row.state === filter.state,
  );
  const chip = (label: string, count: number, href: string, current: boolean, cls = '') =>
    `<a href="${href}" class="${[cls, current ? 'current' : ''].join(' ').trim()}" data-filter="${escapeHtml(label)}">${escapeHtml(label)} <span class="count">${count}</span></a>`;
  const states = [
    chip('all', sum(inKind), linkTo(filter, { state: undefined }), !filter.state),
    chip('open', sum(inKind.filter((row) => !isTerminal(row.state))), linkTo(filter, { state: 'open' }), filter.state === 'open'),
    ...[null, ...OPERATION_STATES].flatMap((state) => {
      const count = sum(inKind.filter((row) => row.state === state));
      const label = state ?? 'tracked';
      return count ? [chip(label, count, linkTo(filter, { state: label as Filter['state'] }), filter.state === label, state ?? '')] : [];
    }),
  ];
  // A kind chosen is kept when its provider is chosen, and let go for another provider (it would match nothing).
  const providers = [
    chip('any provider', sum(inState), linkTo(filter, { provider: undefined }), !filter.provider),
    ...PROVIDERS.flatMap((provider) => {
      const count = sum(inState.filter((row) => providerOf(row.kind) === provider));
      const kind = filter.kind && providerOf(filter.kind) === provider ? filter.kind : undefined;
      return count ? [chip(provider, count, linkTo(filter, { provider, kind }), filter.provider === provider)] : [];
    }),
  ];
  const inProvider = inState.filter(ofProvider);
  const kinds = [
    chip('any kind', sum(inProvider), linkTo(filter, { kind: undefined }), !filter.kind),
    ...OPERATION_KINDS.flatMap((kind) => {
      const count = sum(inProvider.filter((row) => row.kind === kind));
      return count ? [chip(kind, count, linkTo(filter, { kind }), filter.kind === kind)] : [];
    }),
  ];
  // A receiver that fails shows here from its first failed attempt, not only once an effect is set aside.
  const chips = EFFECTS_FILTERS.filter((which) => troubled[which] > 0 || filter.effects === which).map((which) =>
    chip(
      which,
      troubled[which],
      linkTo(filter, { effects: filter.effects === which ? undefined : which }),
      filter.effects === which,
      which,
    ),
  );
  const effects = chips.length > 0 ? `<p>effects: ${chips.join('')}</p>` : '';
  // Jobs open past their kind's limit, from the first one (a job stuck at Gemini for a day is the common complaint).
  const overdue =
    overdueCount > 0 || filter.overdue
      ? `<p>late: ${chip('overdue', overdueCount, linkTo(filter, { overdue: !filter.overdue }), Boolean(filter.overdue), 'retrying')}</p>`
      : '';
  return `<nav id="counts"><p>state: ${states.join('')}</p><p>provider: ${providers.join('')}</p><p>kind: ${kinds.join('')}</p>${effects}${overdue}</nav>`;
}

type TimelineItem = { at: string; write?: HistoryEntry; decision?: Decision };

/**
 * Applied writes from the history (complete past the decisions' retention),
 * each with its decision when kept (for the signature scheme), and the
 * decisions no write came from, merged by time.
 */
async function timeline(deps: ConsoleDeps, view: OperationView, now: number): Promise<string> {
  const [history, decisions] = await Promise.all([deps.history.list(view.name), deps.store.decisions(view.name)]);
  const items: TimelineItem[] = history.map((write) => ({ at: write.recordedAt, write }));
  for (const decision of decisions) {
    const write = decision.verdict === 'applied' ? items.find((item) => item.write?.version === decision.version) : undefined;
    if (write) write.decision = decision;
    else items.push({ at: decision.at, decision }); // a refusal, or a write the history has not caught up with
  }
  items.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : (a.write?.version ?? 0) - (b.write?.version ?? 0)));
  const effectOf = await effectStatuses(deps, view.name, history);
  const rows = items.map((item) => timelineRow(item, now, effectOf));
  const sinkOff = deps.effects()
    ? ''
    : '<p><small>The outbound sink is off (<code>EFFECTS_WEBHOOK_URL</code> is not set): no effects.</small></p>';
  // Only a letter still set aside can be re-driven (one being re-driven is retrying again).
  const dead = effectOf.deadLetters.some((letter) => letter.status === 'dead')
    ? `<p><button id="redrive" data-post="${deps.basePath ?? ''}/effects/redrive" data-body="${escapeHtml(JSON.stringify({ name: view.name }))}">redrive</button></p>`
    : '';
  return `<div class="scroll"><table id="timeline"><thead><tr><th>when</th><th>source</th><th class="wide">event</th><th>what Ratchet did</th><th>effect</th></tr></thead>
<tbody>${rows.join('')}</tbody></table></div>${sinkOff}${dead}`;
}

function timelineRow(item: TimelineItem, now: number, effectOf: EffectStatuses): string {
  const { write, decision } = item;
  const source = `${escapeHtml(write?.source ?? decision?.source)}${decision?.scheme ? ` <small>${escapeHtml(decision.scheme)}</small>` : ''}`;
  const eventId = write?.eventId ?? decision?.eventId;
  const updateTime = write?.updateTime ?? decision?.updateTime;
  const event = `${eventId ? `<code>${escapeHtml(eventId)}</code>` : ''}${updateTime ? `<br><small title="the event's own time: ${escapeHtml(updateTime)}">at ${escapeHtml(shortTime(updateTime))}</small>` : ''}`;
  let verdict: string;
  let cls: string;
  let effect = '';
  if (write) {
    cls = 'applied';
    verdict =
      write.source === 'track'
        ? `v${write.version} tracked`
        : write.stateChanged
          ? `v${write.version} <span class="${escapeHtml(write.previousState)}">${escapeHtml(write.previousState ?? '–')}</span> → <strong class="${escapeHtml(write.state)}">${escapeHtml(write.state)}</strong>`
          : `v${write.version} same state, newer time`;
    if (write.stateChanged) effect = effectOf.status(write.version);
  } else if (decision?.verdict === 'applied') {
    cls = 'applied';
    verdict = `v${decision.version} ${escapeHtml(decision.state)}`;
    effect = effectOf.status(decision.version ?? 0);
  } else if (decision?.verdict === 'verifying-by-poll') {
    cls = 'noted';
    verdict = `${escapeHtml(decision.state)} claimed, signed by a JWT only: not trusted, a poll of Gemini was asked for`;
  } else {
    cls = 'refused';
    verdict = `${escapeHtml(decision?.state)} refused: <span class="reason">${escapeHtml(reasonInWords(decision?.reason))}</span> <small>(${escapeHtml(decision?.reason)})</small>`;
  }
  return `<tr class="${cls}"><td>${when(item.at, now)}</td><td>${source}</td><td class="wide">${event}</td><td>${verdict}</td><td class="effect">${effect}</td></tr>`;
}

interface EffectStatuses {
  deadLetters: DeadLetter[];
  status(version: number): string;
}

/**
 * How long after its write a state change not yet in the queue, the ledger or
 * the dead letters still shows "queued": the derived-work process takes it
 * into the queue a moment after history. Older, it was delivered before the
 * ledger's retention, or written while the outbound sink was off.
 */
const ENQUEUED_WITHIN_MS = 60_000;

/** What the effects path holds of one operation (read by effectStatuses). */
export interface EffectFacts {
  deadLetters: DeadLetter[];
  /** Versions the ledger has as delivered, with how their delivery went. */
  delivered: Map<number, DeliveryAttempts>;
  pending: PendingEffectView[];
  /** Each state change's write time, by version. */
  recordedAt: Map<number, string>;
}

async function effectStatuses(deps: ConsoleDeps, name: string, history: HistoryEntry[]): Promise<EffectStatuses> {
  const effects = deps.effects();
  if (!effects) return { deadLetters: [], status: () => '' };
  const facts: EffectFacts = {
    deadLetters: (await effects.deadLetters.list()).filter((letter) => letter.name === name),
    delivered: new Map(),
    pending: await effects.pending(name),
    recordedAt: new Map(),
  };
  for (const { version, recordedAt } of history.filter((entry) => entry.stateChanged)) {
    facts.recordedAt.set(version, recordedAt);
    // The outbound webhook's ledger entry, or the application's onChange's (inside an app): whichever sink delivered it.
    for (const sink of EFFECT_SINKS) {
      const delivery = await effects.ledger.delivery(sink, `${name}#${version}`);
      if (delivery) facts.delivered.set(version, delivery);
    }
  }
  return { deadLetters: facts.deadLetters, status: (version) => effectStatus(version, facts, Date.now()) };
}

/**
 * A state change's effect, as the timeline shows it: dead-lettered (with why),
 * delivered, retrying, queued (those two marked `effect-pending`, which the
 * page's script watches), or "–" when nothing holds it any more.
 */
export function effectStatus(version: number, facts: EffectFacts, now: number): string {
  const letter = facts.deadLetters.find((d) => d.version === version);
  if (letter && letter.status !== 'redriving')
    return `<span class="dead-lettered">dead-lettered</span> <small>${escapeHtml(letter.reason)}: ${escapeHtml(letter.lastError)}, ${letter.attempts} attempts</small>`;
  const waiting = facts.pending.find((p) => p.version === version);
  // Still retrying for one sink while another has it: retrying, not delivered.
  if (waiting && waiting.receiveCount > 0)
    return `<span class="retrying effect-pending">retrying</span> <small>attempt ${waiting.receiveCount}, next ${when(new Date(waiting.retryAt || now).toISOString(), now)}${waiting.lastError ? `: <span class="last-attempt">${escapeHtml(waiting.lastError)}</span>` : ''}</small>`;
  const delivered = facts.delivered.get(version);
  // A receiver's outage leaves its trace: on which attempt it went through, and what failed before.
  if (delivered)
    return delivered.attempts > 1
      ? `delivered <small>on attempt ${delivered.attempts}${delivered.earlierFailure ? `; before, <span class="last-attempt">${escapeHtml(delivered.earlierFailure)}</span>` : ''}</small>`
      : 'delivered';
  if (waiting || now - Date.parse(facts.recordedAt.get(version) ?? '') < ENQUEUED_WITHIN_MS)
    return '<span class="effect-pending">queued</span>';
  return `<span title="not in the queue, the ledger (kept ${LEDGER_RETENTION_SECONDS / 86_400} days) or the dead letters: delivered before that, or written while the outbound sink was off">–</span>`;
}
