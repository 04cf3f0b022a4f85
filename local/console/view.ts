/**
 * How the console says things: escaped HTML, times as "3 min ago" with the
 * exact UTC time on hover, the reducer's reasons and reconcile's notes in
 * words. Pure: the caller passes `now`.
 */

import type { OperationView } from '../../app/ports.ts';
import { CREDENTIAL_VARIABLES } from '../../app/reconcile/providers.ts';
import { isTerminal, type ProviderName } from '../../core/lifecycle.ts';
import type { DiscardReason } from '../../core/reducer.ts';

export const escapeHtml = (value: unknown) =>
  String(value ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] as string);

const STYLE = `body{font:14px/1.45 system-ui,sans-serif;margin:1.5rem;color:#222;max-width:80rem}
h1{font-size:1.3rem}h1 a{color:inherit;text-decoration:none}h2{font-size:1.1rem;margin-top:1.5rem}
.scroll{overflow-x:auto}table{border-collapse:collapse;width:100%}td,th{padding:.3rem .6rem;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
th{font-weight:600;white-space:nowrap}time{white-space:nowrap}code{font-size:12px;word-break:break-all}
nav p{margin:.3rem 0}nav a{display:inline-block;margin:0 .6rem .2rem 0;padding:.1rem .5rem;border:1px solid #ccc;border-radius:1rem;text-decoration:none;color:inherit}
nav a.current{background:#222;color:#fff;border-color:#222}.count{font-weight:600}
.SUCCEEDED{color:#176f2c}.FAILED,.EXPIRED,.CANCELLED,.dead-lettered{color:#b00020}.RUNNING,.REQUIRES_ACTION,.PENDING,.retrying{color:#8a5a00}
tr.refused,tr.noted{color:#888}tr.refused td,tr.noted td{font-style:italic}.reason{color:#555}small{color:#777}
@media (max-width:640px){body{margin:.6rem}td,th{padding:.25rem .3rem}.wide{display:none}}`;

/**
 * The console's one script, allowed by the page's CSP nonce (no inline
 * handlers):
 * - a button with `data-post` POSTs its `data-body` there as JSON, with the
 *   session's CSRF token, and shows the answer (then, two seconds later,
 *   `#live` is fetched again, to show what the POST started);
 * - `#live` follows the change stream its `data-stream` names (from the
 *   cursor the page was rendered at): a quarter of a second after a change
 *   (at most four times a second, however many come) the page's `#live` is
 *   fetched again (`?part=live`: that element alone, read into an inert
 *   template, so no style of a whole page is applied against this page's
 *   nonce, which the browser reports as a CSP violation) and replaced in place, so rows appear without a reload. The
 *   browser's EventSource reconnects by itself with the last id it saw; one
 *   the server refuses (410 past the feed's retention, 401 when the session
 *   ended) it gives up on, so then the page is fetched again and followed
 *   from its new cursor (three tries, a second apart and more), or the
 *   status says to reload;
 * - an effect not delivered yet (`.effect-pending`: queued or retrying) is
 *   not a change, so the stream does not announce its delivery: while one
 *   shows, `#live` is fetched again every two seconds.
 */
const SCRIPT = `const csrf=document.querySelector('meta[name=csrf-token]')?.content??'';
const live=document.getElementById('live'),status=document.getElementById('live-status');
const say=(text)=>{if(status)status.textContent=text;};
let timer,pendingTimer,restarts=0;
const refresh=async()=>{const u=new URL(location.href);u.searchParams.set('part','live');
const r=await fetch(u);if(!r.ok)return undefined;
const t=document.createElement('template');t.innerHTML=await r.text();const next=t.content.getElementById('live');
if(next){live.replaceChildren(...next.childNodes);live.dataset.stream=next.dataset.stream??'';bind(live);watchPending();}return next;};
const later=(ms)=>setTimeout(()=>refresh().catch(()=>undefined),ms);
const watchPending=()=>{if(pendingTimer||!live?.querySelector('.effect-pending'))return;
pendingTimer=setTimeout(()=>{pendingTimer=undefined;refresh().catch(()=>undefined);},2000);};
const bind=(root)=>{for(const b of root.querySelectorAll('button[data-post]'))b.addEventListener('click',async()=>{
const r=await fetch(b.dataset.post,{method:'POST',headers:{'content-type':'application/json','x-csrf-token':csrf},body:b.dataset.body});
b.textContent=(r.ok?'redriven: ':'refused: ')+JSON.stringify(await r.json());if(live)later(2000);});};
bind(document);watchPending();
const follow=(url)=>{const source=new EventSource(url);
source.addEventListener('change',()=>{if(timer)return;timer=setTimeout(()=>{timer=undefined;refresh().catch(()=>undefined);},250);});
source.addEventListener('open',()=>{restarts=0;say('live: updates as changes happen');});
source.addEventListener('error',()=>{if(source.readyState!==EventSource.CLOSED)return say('live updates paused: reconnecting…');
if(restarts>=3)return say('live updates stopped: reload the page');
restarts++;say('live updates paused: starting again…');
setTimeout(async()=>{const next=await refresh().catch(()=>undefined);
if(next?.dataset.stream)follow(next.dataset.stream);else say('live updates stopped: reload the page');},1000*restarts);});};
if(live?.dataset.stream&&window.EventSource)follow(live.dataset.stream);`;

/** A page's changing part, kept up to date from the change stream at `stream` (see SCRIPT). */
export function live(stream: string, body: string): string {
  return `<main id="live" data-stream="${escapeHtml(stream)}">${body}</main><p><small id="live-status">live updates off (no script)</small></p>`;
}

export interface PageOptions {
  refreshSeconds?: number;
  /** The CSP nonce of this answer (Hono's secure-headers): the style and the script carry it. */
  nonce?: string;
  /** The session's CSRF token, for the script's POSTs. */
  csrf?: string;
  /** Where the console is mounted ('' at the root): its own links start with it. */
  basePath?: string;
}

export function page(title: string, body: string, options: PageOptions & { part?: 'live' } = {}): string {
  const { refreshSeconds, nonce, csrf, basePath = '' } = options;
  // The live part alone, for the script's refresh: the one `<main id="live">` the body holds.
  if (options.part === 'live') return /<main id="live"[\s\S]*<\/main>/.exec(body)?.[0] ?? '';
  const nonceAttribute = nonce ? ` nonce="${escapeHtml(nonce)}"` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
${refreshSeconds ? `<meta http-equiv="refresh" content="${refreshSeconds}">` : ''}${csrf ? `<meta name="csrf-token" content="${escapeHtml(csrf)}">` : ''}<title>${escapeHtml(title)} · Ratchet</title><style${nonceAttribute}>${STYLE}</style>
</head><body><h1><a href="${escapeHtml(basePath)}/">Ratchet</a> · ${escapeHtml(title)}</h1>${body}<script${nonceAttribute}>${SCRIPT}</script></body></html>`;
}

/** "12 s ago", "3 min ago", "in 40 s"; the exact UTC time on hover. */
export function when(iso: string | null | undefined, now: number): string {
  if (!iso) return '';
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return escapeHtml(iso);
  const exact = `${new Date(at)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, '')} UTC`;
  return `<time datetime="${escapeHtml(iso)}" title="${exact}">${relative(at - now)}</time>`;
}

/** `2026-11-30T10:00:00.000000000Z` → `2026-11-30 10:00:00 UTC` (the fraction kept when it says something). */
export const shortTime = (time: string) =>
  `${time
    .replace('T', ' ')
    .replace(/Z$/, '')
    .replace(/(\.\d*?)0+$/, '$1')
    .replace(/\.$/, '')} UTC`;

function relative(deltaMs: number): string {
  const seconds = Math.round(Math.abs(deltaMs) / 1000);
  const [amount, unit] =
    seconds < 60
      ? [seconds, 's']
      : seconds < 3600
        ? [Math.round(seconds / 60), 'min']
        : seconds < 86_400
          ? [Math.round(seconds / 3600), 'h']
          : [Math.round(seconds / 86_400), 'd'];
  if (seconds < 1) return 'now';
  return deltaMs > 0 ? `in ${amount} ${unit}` : `${amount} ${unit} ago`;
}

const REASONS: Record<DiscardReason, string> = {
  duplicate: 'same delivery again',
  'regress-from-terminal': 'after the job ended',
  'lower-rank': 'older than what is stored',
  'stale-or-equal-update-time': 'not newer than what is stored',
  'terminal-conflict': 'a second, different end (a provider anomaly, kept out)',
};

export const reasonInWords = (reason: string | undefined) => REASONS[reason as DiscardReason] ?? reason ?? 'refused';

/** Reconcile's note on a job `provider` runs, in words (the provider by its name in Ratchet, as the console's filters show it). */
function noteInWords(note: string, provider: ProviderName): string {
  if (note === 'not-found')
    return `${provider} no longer knows it (404 three times); its state is left as it was, a webhook can still end it`;
  if (note === 'invalid-name') return `not a name ${provider} answers for`;
  if (note === 'other-project') return 'not in the Agent Platform project and location this Ratchet polls (GOOGLE_CLOUD_PROJECT)';
  if (note === 'expired-unseen') return `tracked, never seen at ${provider}, for longer than TRACKED_EXPIRY_DAYS`;
  if (note === 'unstorable') return `${provider}'s answer could not be stored`;
  if (note.startsWith('unknown-state:'))
    return `${provider} answered a state Ratchet does not know (${note.slice('unknown-state:'.length)})`;
  return note;
}

/** Where `provider`'s credential is set, its variables as code. */
const credentialInWords = (provider: ProviderName) =>
  escapeHtml(CREDENTIAL_VARIABLES[provider]).replace(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b/g, '<code>$&</code>');

/** Reconcile's side of an operation: when it polls next, what failed, or why it stopped. */
export function pollingInWords(view: OperationView, now: number, reconcileOn: boolean): string {
  // An end a bare webhook brought is polled on for its outcome.
  const outcomeToCome = isTerminal(view.state) && view.resultPending === true;
  if (isTerminal(view.state) && !outcomeToCome) return 'done';
  if (!reconcileOn) return `not polled here (no credential for ${view.provider}: ${credentialInWords(view.provider)})`;
  const { nextPollAt, failedPolls, notFoundPolls, note } = view.polling;
  const words = (text: string) => escapeHtml(noteInWords(text, view.provider));
  if (!nextPollAt) return `<span class="dead-lettered">stopped</span>: ${words(note ?? 'unknown')}`;
  const problems = [
    failedPolls > 0 && `${failedPolls} failed in a row${note ? ` (${words(note)})` : ''}`,
    notFoundPolls > 0 && `not found ${notFoundPolls}×`,
    // Not a failure (polling goes on), but worth a look: the provider is newer than this Ratchet.
    failedPolls === 0 && note?.startsWith('unknown-state:') && words(note),
  ].filter(Boolean);
  const next = `${outcomeToCome ? 'ended, its outcome to come: ' : ''}next poll ${when(nextPollAt, now)}`;
  return `${next}${problems.length ? `; <span class="retrying">${problems.join('; ')}</span>` : ''}`;
}
