import { describe, expect, it } from 'vitest';
import { eventFromBatch, eventFromOperation, MalformedPollError } from '../../lambda/core/gemini-poll.ts';
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
