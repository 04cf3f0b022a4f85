import { describe, expect, it } from 'vitest';
import { MAX_INTERVAL_SECONDS, nextPoll } from '../../app/reconcile/reconcile.ts';
import { eventFromBatch, eventFromInteraction, eventFromOperation, MalformedPollError } from '../../providers/gemini/events.ts';
import { UnknownProviderStateError } from '../../providers/port.ts';

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
    expect(eventFromBatch('batches/1', 'batch', { state: raw, updateTime: '2026-11-30T10:00:00.5-01:00' })).toEqual({
      name: 'batches/1',
      kind: 'batch',
      state,
      providerState: raw,
      updateTime: '2026-11-30T11:00:00.500000000Z',
      source: 'poll',
    });
  });

  it('reads an Agent Platform batch prediction job the same way, its output where it was written', () => {
    const name = 'projects/p1/locations/us-central1/batchPredictionJobs/77';
    expect(
      eventFromBatch(name, 'platform-batch', {
        state: 'JOB_STATE_SUCCEEDED',
        updateTime: '2026-12-01T10:00:00Z',
        outputInfo: { gcsOutputDirectory: 'gs://out/prediction-77' },
        dest: { gcsUri: 'gs://out' },
      }),
    ).toEqual({
      name,
      kind: 'platform-batch',
      state: 'SUCCEEDED',
      providerState: 'JOB_STATE_SUCCEEDED',
      updateTime: '2026-12-01T10:00:00.000000000Z',
      source: 'poll',
      result: { outputUri: 'gs://out/prediction-77' },
    });
    expect(eventFromBatch(name, 'platform-batch', { state: 'JOB_STATE_RUNNING', dest: { bigqueryUri: 'bq://p.d.t' } }).result).toEqual({
      outputUri: 'bq://p.d.t',
    });
  });

  it('keeps the output file and the error', () => {
    expect(eventFromBatch('batches/1', 'batch', { state: 'JOB_STATE_SUCCEEDED', dest: { fileName: 'files/out' } }).result).toEqual({
      outputUri: 'files/out',
    });
    expect(eventFromBatch('batches/1', 'batch', { state: 'JOB_STATE_FAILED', error: { code: 3, message: 'bad input' } }).result).toEqual({
      error: { code: 3, message: 'bad input' },
    });
  });

  it.each([undefined, 'JOB_STATE_UNSPECIFIED', 'BATCH_STATE_SOMETHING'])('rejects the unknown state %j', (state) => {
    expect(() => eventFromBatch('batches/1', 'batch', { state })).toThrow(UnknownProviderStateError);
  });

  it('rejects an unparseable updateTime', () => {
    expect(() => eventFromBatch('batches/1', 'batch', { state: 'JOB_STATE_RUNNING', updateTime: 'now' })).toThrow(MalformedPollError);
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

  it('reads an Agent Platform Veo operation as a video: done with no video is a failure there too', () => {
    const name = 'projects/p1/locations/us-central1/publishers/google/models/veo-3.1-generate-001/operations/op9';
    expect(
      eventFromOperation(name, 'platform-video', { done: true, response: { generatedVideos: [{ video: { uri: 'gs://b/v.mp4' } }] } }),
    ).toMatchObject({ kind: 'platform-video', state: 'SUCCEEDED', result: { outputUri: 'gs://b/v.mp4' } });
    expect(eventFromOperation(name, 'platform-video', { done: true, response: { raiMediaFilteredCount: 2 } })).toMatchObject({
      state: 'FAILED',
      providerState: 'DONE_FILTERED',
    });
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
    ['requires_continuation', 'FAILED'],
    ['requires_action', 'REQUIRES_ACTION'],
    ['completed', 'SUCCEEDED'],
    ['failed', 'FAILED'],
    ['budget_exceeded', 'FAILED'],
    ['incomplete', 'FAILED'],
    ['cancelled', 'CANCELLED'],
  ])('maps %s to %s, keeping the raw status and `updated` as the time', (status, state) => {
    expect(eventFromInteraction('interactions/i1', 'interaction', { status, updated: '2026-12-01T10:05:00Z' })).toMatchObject({
      name: 'interactions/i1',
      kind: 'interaction',
      state,
      providerState: status,
      updateTime: '2026-12-01T10:05:00.000000000Z',
      source: 'poll',
    });
  });

  it('says why an incomplete, over-budget or stopped interaction failed', () => {
    expect(eventFromInteraction('interactions/i1', 'interaction', { status: 'incomplete' }).result).toEqual({
      error: { status: 'INCOMPLETE', message: 'the interaction ended before its output was complete' },
    });
    expect(eventFromInteraction('interactions/i1', 'interaction', { status: 'budget_exceeded' }).result?.error?.status).toBe(
      'BUDGET_EXCEEDED',
    );
    const stopped = eventFromInteraction('interactions/i1', 'interaction', { status: 'requires_continuation' });
    expect(stopped.state).toBe('FAILED');
    expect(stopped.result?.error?.status).toBe('REQUIRES_CONTINUATION');
    expect(stopped.result?.error?.message).toContain('continuation_token');
  });

  it("reads a failed interaction's errors[]: the first code kept as text, every message", () => {
    const failed = eventFromInteraction('interactions/i1', 'interaction', {
      status: 'failed',
      errors: [
        { code: 'https://ai.google.dev/errors/model-overloaded', message: 'the model is overloaded' },
        { code: 'https://ai.google.dev/errors/tool-failed', message: 'a tool failed' },
      ],
    });
    expect(failed.result).toEqual({
      error: { code: 'https://ai.google.dev/errors/model-overloaded', message: 'the model is overloaded; a tool failed' },
    });
    // errors[] wins over the status's own reason, which stays as the status.
    expect(
      eventFromInteraction('interactions/i1', 'interaction', { status: 'incomplete', errors: [{ message: 'max_output_tokens reached' }] })
        .result,
    ).toEqual({ error: { message: 'max_output_tokens reached', status: 'INCOMPLETE' } });
    // The older single `error` still reads.
    expect(
      eventFromInteraction('interactions/i1', 'interaction', { status: 'failed', error: { code: 13, message: 'internal' } }).result,
    ).toEqual({ error: { code: 13, message: 'internal' } });
  });

  it('records the output of a completed interaction as a URI when it was delivered by one, and nothing of inline bytes', () => {
    const steps = [
      { type: 'user_input', content: [{ type: 'text' }] },
      { type: 'thought' },
      {
        type: 'model_output',
        content: [
          { type: 'text' },
          { type: 'image', uri: 'https://generativelanguage.googleapis.com/v1beta/files/poster' },
          { type: 'video', uri: 'https://generativelanguage.googleapis.com/v1beta/files/clip', mime_type: 'video/mp4' },
        ],
      },
    ];
    const done = eventFromInteraction('interactions/v1_omni', 'interaction', { status: 'completed', steps });
    expect(done.result).toEqual({ outputUri: 'https://generativelanguage.googleapis.com/v1beta/files/clip' });
    const inline = eventFromInteraction('interactions/v1_omni', 'interaction', {
      status: 'completed',
      steps: [{ type: 'model_output', content: [{ type: 'video', mime_type: 'video/mp4' }] }],
    });
    expect(inline.result).toBeUndefined();
    expect(eventFromInteraction('projects/p/locations/l/interactions/i2', 'platform-interaction', { status: 'completed' }).kind).toBe(
      'platform-interaction',
    );
  });

  it('never guesses an unknown status: it throws with the raw value kept', () => {
    const error = (() => {
      try {
        eventFromInteraction('interactions/i1', 'interaction', { status: 'paused_for_lunch' });
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
