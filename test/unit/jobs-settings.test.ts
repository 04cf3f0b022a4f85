/**
 * The settings of issue 45's features, as pure functions: GEMINI_API_KEYS'
 * pairs (and, in AWS, the same pairs in the Gemini key's secret), and
 * OVERDUE_AFTER's limits with the overdue rule itself.
 */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';
import { pollerOptionsOf } from '../../app/reconcile/gemini-settings.ts';
import { geminiKeysOf } from '../../core/credentials.ts';
import { DEFAULT_OVERDUE_AFTER, overdueLimitsOf, overdueMark, overdueSince } from '../../core/overdue.ts';
import { type OperationRecord, trackedRecord } from '../../core/reducer.ts';

describe('GEMINI_API_KEYS', () => {
  it('reads label=key pairs in order, commas or spaces between', () => {
    expect(geminiKeysOf('team-a=AIzaA, team_b.2=AIzaB')).toEqual([
      { label: 'team-a', apiKey: 'AIzaA' },
      { label: 'team_b.2', apiKey: 'AIzaB' },
    ]);
  });

  it.each(['', 'AIzaA', '=AIzaA', 'a=', 'a=k,a=k2', '-a=k', `${'x'.repeat(65)}=k`])('refuses %j', (value) => {
    expect(geminiKeysOf(value)).toBeUndefined();
  });

  it('gives the poller each key by label, the first the default; in AWS the Gemini key secret may hold the pairs', async () => {
    const local = await pollerOptionsOf(loadConfig({ GEMINI_API_KEYS: 'a=k1,b=k2' }), async () => undefined);
    expect(local?.gemini).toMatchObject({
      apiKey: 'k1',
      keys: [
        { label: 'a', apiKey: 'k1' },
        { label: 'b', apiKey: 'k2' },
      ],
    });
    const aws = await pollerOptionsOf(loadConfig({}), async (name) => (name === 'GEMINI_API_KEY' ? 'a=k1,b=k2' : undefined));
    expect(aws?.gemini?.keys?.map((k) => k.label)).toEqual(['a', 'b']);
    const single = await pollerOptionsOf(loadConfig({}), async (name) => (name === 'GEMINI_API_KEY' ? 'AIzaOnly' : undefined));
    expect(single?.gemini).toEqual(expect.objectContaining({ apiKey: 'AIzaOnly' }));
    expect(single?.gemini?.keys).toBeUndefined();
  });
});

describe('OVERDUE_AFTER', () => {
  it('overrides the defaults; a family name sets both backends unless the kind is named too; off is never', () => {
    const limits = overdueLimitsOf('batch=2d interaction=90m,platform-interaction=off,tuning=1.5h,video=45s') as NonNullable<
      ReturnType<typeof overdueLimitsOf>
    >;
    expect(limits).toMatchObject({
      batch: 172_800,
      'platform-batch': 172_800,
      interaction: 5_400,
      'platform-interaction': null,
      'platform-tuning': 5_400,
      video: 45,
      'platform-video': 45,
      operation: DEFAULT_OVERDUE_AFTER.operation,
      'file-search': DEFAULT_OVERDUE_AFTER['file-search'],
    });
  });

  it.each(['', 'batch', 'batch=', 'batch=26', 'batch=0h', 'batch=h', 'batch=1w', 'batches=1h', 'batch=1h,batch=2h', 'BATCH=1h'])(
    'refuses %j',
    (value) => {
      expect(overdueLimitsOf(value)).toBeUndefined();
    },
  );

  it('marks an observed open job past its limit once, at the next version, state and times unchanged', () => {
    const open: OperationRecord = {
      ...trackedRecord('batches/1', 'batch', '2026-12-01T00:00:00.000000000Z'),
      state: 'RUNNING',
      providerState: 'JOB_STATE_RUNNING',
      updateTime: '2026-12-01T00:05:00.000000000Z',
      version: 2,
      source: 'poll',
    };
    expect(overdueSince(open, DEFAULT_OVERDUE_AFTER)).toBe('2026-12-02T02:00:00.000Z');
    expect(overdueMark(open, DEFAULT_OVERDUE_AFTER, '2026-12-02T01:59:59.000000000Z')).toBeUndefined();
    const mark = overdueMark(open, DEFAULT_OVERDUE_AFTER, '2026-12-02T02:00:01.000000000Z');
    expect(mark).toMatchObject({
      version: 3,
      state: 'RUNNING',
      previousState: 'RUNNING',
      stateChanged: false,
      updateTime: open.updateTime,
      source: 'overdue',
      overdue: { at: '2026-12-02T02:00:01.000000000Z', afterSeconds: 26 * 3600 },
    });
    // Once: a marked job is never marked again; an ended one, one never observed, or a kind that is off, never.
    expect(overdueMark(mark as OperationRecord, DEFAULT_OVERDUE_AFTER, '2026-12-09T00:00:00Z')).toBeUndefined();
    expect(overdueMark({ ...open, state: 'SUCCEEDED' }, DEFAULT_OVERDUE_AFTER, '2026-12-09T00:00:00Z')).toBeUndefined();
    expect(overdueMark({ ...open, state: null }, DEFAULT_OVERDUE_AFTER, '2026-12-09T00:00:00Z')).toBeUndefined();
    expect(overdueMark(open, { ...DEFAULT_OVERDUE_AFTER, batch: null }, '2026-12-09T00:00:00Z')).toBeUndefined();
  });
});
