import { describe, expect, it } from 'vitest';
import type { OperationState } from '../../core/lifecycle.ts';
import { applyEvent, type OperationEvent, type OperationRecord, trackedRecord } from '../../core/reducer.ts';

const NOW = '2026-12-01T00:00:00.000000000Z';
const T1 = '2026-11-30T10:00:00.000000000Z';
const T2 = '2026-11-30T10:00:00.000000001Z';

function event(state: OperationState, updateTime?: string, extra: Partial<OperationEvent> = {}): OperationEvent {
  return { name: 'batches/1', kind: 'batch', state, providerState: `JOB_STATE_${state}`, updateTime, source: 'poll', ...extra };
}

function stored(state: OperationState | null, updateTime: string | null, version = 3): OperationRecord {
  return { ...trackedRecord('batches/1', 'batch', '2026-11-29T00:00:00.000000000Z'), state, updateTime, version };
}

describe('applyEvent', () => {
  it('creates version 1 for an unknown operation, as a state change from nothing', () => {
    const decision = applyEvent(undefined, event('RUNNING', T1, { eventId: 'e1' }), NOW);
    expect(decision).toEqual({
      applied: true,
      stateChanged: true,
      next: {
        name: 'batches/1',
        kind: 'batch',
        provider: 'gemini',
        state: 'RUNNING',
        providerState: 'JOB_STATE_RUNNING',
        updateTime: T1,
        version: 1,
        previousState: null,
        stateChanged: true,
        source: 'poll',
        eventId: 'e1',
        result: null,
        createdAt: NOW,
        recordedAt: NOW,
      },
    });
  });

  it('moves a tracked operation with no state yet, keeping its creation time', () => {
    const decision = applyEvent(stored(null, null, 1), event('PENDING'), NOW);
    expect(decision.applied && decision.next).toMatchObject({
      state: 'PENDING',
      version: 2,
      previousState: null,
      stateChanged: true,
      createdAt: '2026-11-29T00:00:00.000000000Z',
    });
  });

  it.each([
    ['PENDING', 'RUNNING'],
    ['PENDING', 'SUCCEEDED'],
    ['RUNNING', 'FAILED'],
    ['REQUIRES_ACTION', 'CANCELLED'],
  ] as const)('moves up a rank from %s to %s whatever the times', (from, to) => {
    const decision = applyEvent(stored(from, T2), event(to, T1), NOW);
    expect(decision.applied && decision.next).toMatchObject({ state: to, previousState: from, version: 4, stateChanged: true });
  });

  it.each(['PENDING', 'RUNNING', 'REQUIRES_ACTION'] as const)('discards %s after a terminal state as regress-from-terminal', (state) => {
    expect(applyEvent(stored('SUCCEEDED', T1), event(state, T2), NOW)).toEqual({ applied: false, reason: 'regress-from-terminal' });
  });

  it('discards a lower non-terminal rank as lower-rank, even with a newer time', () => {
    expect(applyEvent(stored('RUNNING', T1), event('PENDING', T2), NOW)).toEqual({ applied: false, reason: 'lower-rank' });
  });

  it.each([
    ['an equal time', T1],
    ['an older time', '2026-11-30T09:59:59.999999999Z'],
    ['no time', undefined],
  ])('discards a same-rank event with %s as stale-or-equal-update-time', (_, time) => {
    expect(applyEvent(stored('RUNNING', T1), event('RUNNING', time), NOW)).toEqual({
      applied: false,
      reason: 'stale-or-equal-update-time',
    });
  });

  it('applies a same-rank event one nanosecond newer, without a state change when the state is the same', () => {
    const decision = applyEvent(stored('RUNNING', T1), event('RUNNING', T2), NOW);
    expect(decision).toMatchObject({
      applied: true,
      stateChanged: false,
      next: { state: 'RUNNING', previousState: 'RUNNING', stateChanged: false, version: 4, updateTime: T2 },
    });
  });

  it('fences RUNNING and REQUIRES_ACTION on time within their shared rank', () => {
    const up = applyEvent(stored('RUNNING', T1), event('REQUIRES_ACTION', T2), NOW);
    expect(up).toMatchObject({ applied: true, stateChanged: true, next: { state: 'REQUIRES_ACTION' } });
    expect(applyEvent(stored('REQUIRES_ACTION', T2), event('RUNNING', T1), NOW)).toEqual({
      applied: false,
      reason: 'stale-or-equal-update-time',
    });
  });

  it('lets a timed event replace a same-rank state that had no time', () => {
    expect(applyEvent(stored('RUNNING', null), event('RUNNING', T1), NOW)).toMatchObject({ applied: true, stateChanged: false });
  });

  it('refuses a different terminal state as terminal-conflict, whatever its time', () => {
    expect(applyEvent(stored('SUCCEEDED', T1), event('FAILED', T2), NOW)).toEqual({ applied: false, reason: 'terminal-conflict' });
    expect(applyEvent(stored('CANCELLED', T2), event('EXPIRED', T1), NOW)).toEqual({ applied: false, reason: 'terminal-conflict' });
  });

  it('refreshes the same terminal state with a newer time and keeps the stored result when the event has none', () => {
    const current = { ...stored('SUCCEEDED', T1), result: { outputUri: 'files/out' } };
    expect(applyEvent(current, event('SUCCEEDED', T2), NOW)).toMatchObject({
      applied: true,
      stateChanged: false,
      next: { result: { outputUri: 'files/out' }, version: 4 },
    });
    expect(applyEvent(current, event('SUCCEEDED', T1), NOW)).toEqual({ applied: false, reason: 'stale-or-equal-update-time' });
  });

  it('recognises a redelivered webhook as a duplicate', () => {
    const current = { ...stored('SUCCEEDED', T1), eventId: 'msg_1' };
    expect(applyEvent(current, event('SUCCEEDED', T1, { eventId: 'msg_1', source: 'webhook' }), NOW)).toEqual({
      applied: false,
      reason: 'duplicate',
    });
  });
});
