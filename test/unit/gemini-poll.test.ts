import { describe, expect, it } from 'vitest';
import {
  eventFromBatch,
  eventFromInteraction,
  eventFromOperation,
  MalformedPollError,
  UnknownProviderStateError,
} from '../../lambda/core/gemini-poll.ts';
import { MAX_INTERVAL_SECONDS, nextPoll } from '../../lambda/reconcile/reconcile.ts';

describe('eventFromBatch', () => {
  it.each([
    ['JOB_STATE_QUEUED', 'PENDING'],
    ['JOB_STATE_PENDING', 'PENDING'],
    ['JOB_STATE_RUNNING', 'RUNNING'],
    ['JOB_STATE_UPDATING', 'RUNNING'],
    ['JOB_STATE_PAUSED', 'RUNNING'],
    ['JOB_STATE_CANCELLING', 'RUNNING'],
    ['JOB_STATE_SUCCEEDED', 'SUCCEEDED'],
    ['JOB_STATE_PARTIALLY_SUCCEEDED', 'SUCCEEDED'],
    ['JOB_STATE_FAILED', 'FAILED'],
    ['JOB_STATE_CANCELLED', 'CANCELLED'],
    ['JOB_STATE_EXPIRED', 'EXPIRED'],
  ])('maps %s to %s, keeping the raw state and the normalised updateTime', (raw, state) => {
    expect(eventFromBatch('batches/1', { state: raw, updateTime: '2026-11-30T10:00:00.5-01:00' })).toEqual({
      name: 'batches/1',
      kind: 'batch',
      state,
      providerState: raw,
      updateTime: '2026-11-30T11:00:00.500000000Z',
      source: 'poll',
    });
  });

  it('keeps the output file and the error', () => {
    expect(eventFromBatch('batches/1', { state: 'JOB_STATE_SUCCEEDED', dest: { fileName: 'files/out' } }).result).toEqual({
      outputUri: 'files/out',
    });
    expect(eventFromBatch('batches/1', { state: 'JOB_STATE_FAILED', error: { code: 3, message: 'bad input' } }).result).toEqual({
      error: { code: 3, message: 'bad input' },
    });
  });

  it.each([undefined, 'JOB_STATE_UNSPECIFIED', 'BATCH_STATE_SOMETHING'])('rejects the unknown state %j', (state) => {
    expect(() => eventFromBatch('batches/1', { state })).toThrow(MalformedPollError);
  });

  it('rejects an unparseable updateTime', () => {
    expect(() => eventFromBatch('batches/1', { state: 'JOB_STATE_RUNNING', updateTime: 'now' })).toThrow(MalformedPollError);
  });
});

describe('eventFromOperation', () => {
  it('maps not done to RUNNING, without a time (so it never overrides a same-rank state)', () => {
    expect(eventFromOperation('operations/1', 'operation', { done: false })).toEqual({
      name: 'operations/1',
      kind: 'operation',
      state: 'RUNNING',
      providerState: 'RUNNING',
      source: 'poll',
    });
    expect(eventFromOperation('operations/1', 'operation', {}).state).toBe('RUNNING');
  });

  it('maps done to SUCCEEDED with the video URI, done with error to FAILED, and a cancelled error to CANCELLED', () => {
    expect(
      eventFromOperation('models/veo/operations/1', 'video', {
        done: true,
        response: { generatedVideos: [{ video: { uri: 'gs://v.mp4' } }] },
      }),
    ).toMatchObject({
      state: 'SUCCEEDED',
      providerState: 'DONE',
      result: { outputUri: 'gs://v.mp4' },
    });
    expect(eventFromOperation('models/veo/operations/1', 'video', { done: true, error: { code: 13, message: 'internal' } })).toMatchObject({
      state: 'FAILED',
      result: { error: { code: 13, message: 'internal' } },
    });
    expect(eventFromOperation('operations/1', 'operation', { done: true, error: { code: 1, message: 'cancelled' } }).state).toBe(
      'CANCELLED',
    );
  });
});

describe('Veo outcomes', () => {
  const veo = 'models/veo-3/operations/9';
  it('maps a done answer blocked by the safety filters to FAILED, with the count and reasons as given', () => {
    expect(
      eventFromOperation(veo, 'video', {
        done: true,
        response: { raiMediaFilteredCount: 1, raiMediaFilteredReasons: ['Person generation is not allowed'] },
      }),
    ).toEqual({
      name: veo,
      kind: 'video',
      source: 'poll',
      state: 'FAILED',
      providerState: 'DONE_FILTERED',
      result: {
        error: { status: 'FILTERED', message: 'blocked by safety filters: 1 video(s) filtered (Person generation is not allowed)' },
        filtered: { count: 1, reasons: ['Person generation is not allowed'] },
      },
    });
  });

  it('maps done with a response but no video and no filter count to FAILED with a clear reason', () => {
    expect(eventFromOperation(veo, 'video', { done: true, response: {} })).toMatchObject({
      state: 'FAILED',
      providerState: 'DONE_NO_VIDEO',
      result: { error: { status: 'NO_VIDEO', message: 'done without an error and without a video' } },
    });
    expect(eventFromOperation(veo, 'video', { done: true })).toMatchObject({ state: 'FAILED', providerState: 'DONE_NO_VIDEO' });
  });

  it('keeps the output URI of a real success, and notes videos the filters took from it', () => {
    expect(
      eventFromOperation(veo, 'video', {
        done: true,
        response: { generatedVideos: [{ video: { uri: 'files/v1' } }], raiMediaFilteredCount: 1 },
      }),
    ).toMatchObject({ state: 'SUCCEEDED', result: { outputUri: 'files/v1', filtered: { count: 1, reasons: [] } } });
    // A generic operation without a video is not a video: done is done.
    expect(eventFromOperation('operations/1', 'operation', { done: true, response: {} }).state).toBe('SUCCEEDED');
  });
});

describe('eventFromInteraction', () => {
  it.each([
    ['queued', 'PENDING'],
    ['in_progress', 'RUNNING'],
    ['requires_continuation', 'RUNNING'],
    ['requires_action', 'REQUIRES_ACTION'],
    ['completed', 'SUCCEEDED'],
    ['failed', 'FAILED'],
    ['budget_exceeded', 'FAILED'],
    ['incomplete', 'FAILED'],
    ['cancelled', 'CANCELLED'],
  ])('maps %s to %s, keeping the raw status and `updated` as the time', (status, state) => {
    expect(eventFromInteraction('interactions/i1', { status, updated: '2026-12-01T10:05:00Z' })).toMatchObject({
      name: 'interactions/i1',
      kind: 'interaction',
      state,
      providerState: status,
      updateTime: '2026-12-01T10:05:00.000000000Z',
      source: 'poll',
    });
  });

  it('says why an incomplete or over-budget interaction failed', () => {
    expect(eventFromInteraction('interactions/i1', { status: 'incomplete' }).result).toEqual({ error: { status: 'INCOMPLETE' } });
    expect(eventFromInteraction('interactions/i1', { status: 'budget_exceeded' }).result).toEqual({
      error: { status: 'BUDGET_EXCEEDED' },
    });
  });

  it('never guesses an unknown status: it throws with the raw value kept', () => {
    const error = (() => {
      try {
        eventFromInteraction('interactions/i1', { status: 'paused_for_lunch' });
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(UnknownProviderStateError);
    expect((error as UnknownProviderStateError).raw).toBe('paused_for_lunch');
  });
});

describe('nextPoll', () => {
  const now = new Date('2026-11-30T10:00:00Z');
  const seconds = (t: string) => (Date.parse(`${t.slice(0, 23)}Z`) - now.getTime()) / 1000;

  it('doubles per unchanged poll from the base interval, jittered ±20%, capped', () => {
    expect(seconds(nextPoll({ intervalSeconds: 60, random: () => 0.5 }, now, 0))).toBe(60);
    expect(seconds(nextPoll({ intervalSeconds: 60, random: () => 0.5 }, now, 3))).toBe(480);
    expect(seconds(nextPoll({ intervalSeconds: 60, random: () => 0 }, now, 1))).toBe(96);
    expect(seconds(nextPoll({ intervalSeconds: 60, random: () => 1 }, now, 1))).toBe(144);
    expect(seconds(nextPoll({ intervalSeconds: 60, random: () => 0.5 }, now, 40))).toBe(MAX_INTERVAL_SECONDS);
  });
});
