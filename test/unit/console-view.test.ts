/** How the console words times, reasons and polling (pure), and how it pages a provider's jobs of several kinds. */
import { describe, expect, it } from 'vitest';
import type { DeadLetter } from '../../app/effects/dead-letters.ts';
import type { ConsoleStore } from '../../app/engine.ts';
import type { OperationView } from '../../app/ports.ts';
import { type EffectFacts, effectStatus, listOf } from '../../local/console/console.ts';
import { pollingInWords, reasonInWords, shortTime, when } from '../../local/console/view.ts';

const NOW = Date.parse('2026-12-03T12:00:00Z');
const text = (html: string) => html.replace(/<[^>]+>/g, '');

describe('the console view', () => {
  it('says times relative to now, with the exact UTC time on hover', () => {
    expect(text(when('2026-12-03T11:57:00.000000000Z', NOW))).toBe('3 min ago');
    expect(text(when('2026-12-03T11:59:48Z', NOW))).toBe('12 s ago');
    expect(text(when('2026-12-03T12:00:40Z', NOW))).toBe('in 40 s');
    expect(text(when('2026-12-01T12:00:00Z', NOW))).toBe('2 d ago');
    expect(text(when('2026-12-03T12:00:00.300Z', NOW))).toBe('now');
    expect(when('2026-12-03T09:00:00Z', NOW)).toContain('title="2026-12-03 09:00:00 UTC"');
    expect(when(null, NOW)).toBe('');
    expect(when('<not a time>', NOW)).toBe('&lt;not a time&gt;');
    expect(shortTime('2026-11-30T10:00:00.000000000Z')).toBe('2026-11-30 10:00:00 UTC');
    expect(shortTime('2026-11-30T10:00:10.120000000Z')).toBe('2026-11-30 10:00:10.12 UTC');
  });

  it("words the reducer's reasons, and keeps an unknown one as it is", () => {
    expect(reasonInWords('duplicate')).toBe('same delivery again');
    expect(reasonInWords('regress-from-terminal')).toBe('after the job ended');
    expect(reasonInWords('lower-rank')).toBe('older than what is stored');
    expect(reasonInWords('something-new')).toBe('something-new');
  });

  it("says when reconcile polls next, what failed, or why it stopped, naming the job's provider", () => {
    const view = (
      state: OperationView['state'],
      polling: Partial<OperationView['polling']>,
      provider: OperationView['provider'] = 'gemini',
    ) => ({ state, provider, polling: { nextPollAt: null, failedPolls: 0, notFoundPolls: 0, note: null, ...polling } }) as OperationView;
    expect(pollingInWords(view('SUCCEEDED', {}), NOW, true)).toBe('done');
    expect(text(pollingInWords(view('RUNNING', { nextPollAt: '2026-12-03T12:01:00Z' }), NOW, false))).toBe(
      'not polled here (no credential for gemini: GEMINI_API_KEY, GEMINI_API_KEYS or GOOGLE_CLOUD_PROJECT and GOOGLE_CLOUD_LOCATION)',
    );
    expect(pollingInWords(view('PENDING', { nextPollAt: '2026-12-03T12:01:00Z' }, 'openai'), NOW, false)).toBe(
      'not polled here (no credential for openai: <code>OPENAI_API_KEY</code> or <code>OPENAI_API_KEYS</code>)',
    );
    expect(text(pollingInWords(view('RUNNING', {}, 'bedrock'), NOW, false))).toBe(
      'not polled here (no credential for bedrock: AWS_REGION (the AWS default credential chain))',
    );
    // Ended by a bare webhook: polled on until the provider gives the outcome.
    const bare = { ...view('SUCCEEDED', { nextPollAt: '2026-12-03T12:01:00Z' }, 'openai'), resultPending: true } as OperationView;
    expect(text(pollingInWords(bare, NOW, true))).toBe('ended, its outcome to come: next poll in 1 min');
    expect(text(pollingInWords(view(null, { note: 'not-found', notFoundPolls: 3 }, 'anthropic'), NOW, true))).toBe(
      'stopped: anthropic no longer knows it (404 three times); its state is left as it was, a webhook can still end it',
    );
    expect(text(pollingInWords(view('RUNNING', { nextPollAt: '2026-12-03T12:01:00Z' }), NOW, true))).toBe('next poll in 1 min');
    expect(
      text(pollingInWords(view('RUNNING', { nextPollAt: '2026-12-03T12:01:00Z', failedPolls: 2, note: 'Gemini answered 429' }), NOW, true)),
    ).toBe('next poll in 1 min; 2 failed in a row (Gemini answered 429)');
    expect(text(pollingInWords(view(null, { note: 'not-found', notFoundPolls: 3 }), NOW, true))).toBe(
      'stopped: gemini no longer knows it (404 three times); its state is left as it was, a webhook can still end it',
    );
    expect(text(pollingInWords(view(null, { note: 'other-project' }), NOW, true))).toContain(
      'not in the Agent Platform project and location this Ratchet polls',
    );
  });

  it("words each state change's effect, marks the undelivered ones for the page's script, and claims nothing it no longer holds", () => {
    const letter = { version: 1, reason: 'gone', lastError: 'HTTP 410', attempts: 1, status: 'dead' } as DeadLetter;
    const facts: EffectFacts = {
      deadLetters: [letter, { ...letter, version: 5, status: 'redriving' }],
      delivered: new Map([
        [2, { attempts: 1 }],
        [7, { attempts: 4, earlierFailure: 'answered 503 Service Unavailable' }],
      ]),
      pending: [
        { version: 3, receiveCount: 2, retryAt: NOW + 30_000, lastError: 'answered 400 Bad Request' },
        { version: 5, receiveCount: 0, retryAt: 0, lastError: null },
      ],
      recordedAt: new Map([
        [4, '2026-12-03T11:59:50.000000000Z'],
        [6, '2026-12-03T10:00:00.000000000Z'],
      ]),
    };
    const status = (version: number) => effectStatus(version, facts, NOW);
    expect(text(status(1))).toBe('dead-lettered gone: HTTP 410, 1 attempts');
    expect(status(2)).toBe('delivered');
    expect(text(status(7))).toBe('delivered on attempt 4; before, answered 503 Service Unavailable');
    expect(status(3)).toContain('class="retrying effect-pending"');
    expect(text(status(3))).toBe('retrying attempt 2, next in 30 s: answered 400 Bad Request');
    expect(status(5)).toBe('<span class="effect-pending">queued</span>'); // redriven: queued again
    expect(status(4)).toBe('<span class="effect-pending">queued</span>'); // written 10 s ago: on its way into the queue
    expect(status(6)).not.toContain('effect-pending'); // two hours old and held nowhere
    expect(text(status(6))).toBe('–');
    expect(status(6)).toContain('kept 30 days');
  });
});

describe("the console's list by provider", () => {
  // A stand-in store in the engines' order (open first, then the newest, then by name), filtering by one kind.
  const at = (second: number) => `2026-12-03T11:59:${String(second).padStart(2, '0')}.000000000Z`;
  const jobs = [
    ['batches/1', 'batch', 'SUCCEEDED', 1],
    ['interactions/2', 'interaction', 'RUNNING', 2],
    ['openai/batches/batch_3', 'openai-batch', null, 3],
    ['batches/4', 'batch', null, 4],
    ['models/m/operations/5', 'operation', 'FAILED', 5],
    ['interactions/6', 'interaction', 'SUCCEEDED', 5],
    ['batches/7', 'batch', 'SUCCEEDED', 7],
  ].map(([name, kind, state, second]) => ({ name, kind, state, recordedAt: at(second as number) }) as OperationView);
  const terminal = (o: OperationView) => (o.state === null || o.state === 'RUNNING' ? 0 : 1);
  const ordered = [...jobs].sort(
    (a, b) => terminal(a) - terminal(b) || b.recordedAt.localeCompare(a.recordedAt) || b.name.localeCompare(a.name),
  );
  const store = {
    consoleList: ({ kind, limit, offset }: { kind?: string; limit: number; offset: number }) =>
      ordered.filter((o) => !kind || o.kind === kind).slice(offset, offset + limit),
  } as unknown as ConsoleStore;
  const counts = jobs.map((o) => ({ state: o.state, kind: o.kind, count: 1, overdue: 0, oldestOpenSince: null }));
  const names = (views: OperationView[]) => views.map((o) => o.name);

  it("pages a provider's jobs of several kinds in the store's order, as the whole list filtered by provider", async () => {
    const gemini = names(ordered.filter((o) => !o.kind.startsWith('openai-')));
    expect(gemini).toHaveLength(6);
    for (const offset of [0, 2, 4, 6])
      expect(names(await listOf(store, counts, { provider: 'gemini' }, { limit: 2, offset })), `offset ${offset}`).toEqual(
        gemini.slice(offset, offset + 2),
      );
    expect(names(await listOf(store, counts, { provider: 'openai' }, { limit: 10, offset: 0 }))).toEqual(['openai/batches/batch_3']);
    expect(names(await listOf(store, counts, { provider: 'anthropic' }, { limit: 10, offset: 0 }))).toEqual([]);
    // A kind chosen is the store's own filter; one of another provider matches nothing.
    expect(names(await listOf(store, counts, { provider: 'gemini', kind: 'interaction' }, { limit: 10, offset: 0 }))).toEqual([
      'interactions/2',
      'interactions/6',
    ]);
    expect(await listOf(store, counts, { provider: 'openai', kind: 'batch' }, { limit: 10, offset: 0 })).toEqual([]);
  });
});
