/**
 * The Provider port's conformance suite (providers/port.ts), run on every provider's pure mapping: its names
 * accepted and refused, every state word of issue 58's table mapped (the table written out here, never read from
 * the code), a word not in it thrown as UnknownProviderStateError (reconcile keeps the stored state), the update
 * time, and the outcome in `result` on a terminal answer only, each field only when the provider gave it. Then the
 * pushes: OpenAI's webhook events and Bedrock's EventBridge events.
 *
 * A new provider is one more entry of CASES.
 */
import { describe, expect, it } from 'vitest';
import type { OperationKind, OperationState } from '../../core/lifecycle.ts';
import { isNameOfKind, kindOfName } from '../../core/names.ts';
import type { OperationEvent, OperationResult } from '../../core/reducer.ts';
import { type AnthropicBatchAnswer, eventFromAnthropic } from '../../providers/anthropic/events.ts';
import { type BedrockJobAnswer, bedrockJobOfName, eventFromBedrock, eventFromBedrockEvent } from '../../providers/bedrock/events.ts';
import { type BatchAnswer, eventFromBatch, eventFromInteraction, type InteractionAnswer } from '../../providers/gemini/events.ts';
import { eventFromOpenAI, eventFromOpenAIWebhook, type OpenAIJobAnswer, type OpenAIObjectKind } from '../../providers/openai/events.ts';
import { MalformedEventError } from '../../providers/port.ts';

/** Unix seconds, an hour ago: jobs are created now, never on a date that ages. */
const T0 = Math.floor(Date.now() / 1000) - 3_600;
/** The normalised form of a time in unix seconds, spelled out here (9 fraction digits, UTC). */
const at = (seconds: number) => new Date(seconds * 1000).toISOString().replace(/\.(\d{3})Z$/, '.$1000000Z');
const rfc3339 = (seconds: number) => new Date(seconds * 1000).toISOString();

interface Conformance {
  kind: OperationKind;
  /** A name the mapping is given. */
  name: string;
  accepted: string[];
  refused: string[];
  /** Issue 58's table: each answer as the provider gives it at that state, the state, and the provider's own word. */
  states: Array<{ answer: unknown; state: OperationState; providerState: string }>;
  map(name: string, answer: unknown): OperationEvent;
  /** An answer at a state word the provider may add later. */
  unknown: { answer: unknown; raw: string };
  /** Answers with their times, and the update time each makes. */
  times: Array<{ answer: unknown; updateTime: string | undefined }>;
  /** Answers and the result each makes (undefined: none). */
  outcomes: Array<{ title: string; answer: unknown; result: OperationResult | undefined }>;
}

/** The states of a table of status words, each answered as `answer(word)`. */
function table(states: Record<string, OperationState>, answer: (word: string) => unknown): Conformance['states'] {
  return Object.entries(states).map(([word, state]) => ({ answer: answer(word), state, providerState: word }));
}

/** Names no kind of any provider has: path tricks, empty segments, separators. */
const HOSTILE = ['', '/', 'openai//x', 'openai/batches/../x', 'openai/batches/x/', 'openai/batches/x:cancel', 'openai/batches/%2e', 'a b'];

const batchStatuses = {
  validating: 'PENDING',
  in_progress: 'RUNNING',
  finalizing: 'RUNNING',
  cancelling: 'RUNNING',
  completed: 'SUCCEEDED',
  failed: 'FAILED',
  expired: 'EXPIRED',
  cancelled: 'CANCELLED',
} as const;

const batchOutcomes = [
  { title: 'a bare completed batch: an empty result', answer: { id: 'b1', status: 'completed' }, result: {} },
  {
    title: 'a completed batch: counts (completed as succeeded), tokens, files',
    answer: {
      id: 'b1',
      status: 'completed',
      request_counts: { total: 100, completed: 98, failed: 2 },
      usage: {
        input_tokens: 11_760,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: 3_920,
        output_tokens_details: { reasoning_tokens: 7 },
        total_tokens: 15_680,
      },
      output_file_id: 'file-out',
      error_file_id: 'file-err',
      errors: null,
    },
    result: {
      requestCounts: { total: 100, succeeded: 98, failed: 2 },
      usage: { inputTokens: 11_760, outputTokens: 3_920, totalTokens: 15_680, cachedTokens: 0, thoughtTokens: 7 },
      outputFileId: 'file-out',
      errorFileId: 'file-err',
    },
  },
  {
    title: 'a failed batch: its first error, the null files left out',
    answer: {
      id: 'b1',
      status: 'failed',
      errors: { object: 'list', data: [{ code: 'invalid_json_line', message: 'This line is not parseable as valid JSON.', line: 1 }] },
      request_counts: { total: 0, completed: 0, failed: 0 },
      output_file_id: null,
      error_file_id: null,
      usage: null,
    },
    result: {
      requestCounts: { total: 0, succeeded: 0, failed: 0 },
      error: { code: 'invalid_json_line', message: 'This line is not parseable as valid JSON.' },
    },
  },
  {
    title: 'a batch still running: no result, whatever it counts so far',
    answer: { id: 'b1', status: 'in_progress', request_counts: { total: 100, completed: 40, failed: 0 }, output_file_id: 'file-out' },
    result: undefined,
  },
];

const batchTimes = [
  { answer: { id: 'b1', status: 'validating', created_at: T0, expires_at: T0 + 86_400 }, updateTime: at(T0) },
  {
    answer: {
      id: 'b1',
      status: 'completed',
      created_at: T0,
      in_progress_at: T0 + 60,
      finalizing_at: T0 + 660,
      completed_at: T0 + 720,
      expires_at: T0 + 86_400,
      failed_at: null,
    },
    updateTime: at(T0 + 720),
  },
  { answer: { id: 'b1', status: 'cancelled', created_at: T0, cancelling_at: T0 + 120, cancelled_at: T0 + 180 }, updateTime: at(T0 + 180) },
  {
    answer: { id: 'b1', status: 'expired', created_at: T0, in_progress_at: T0 + 60, expired_at: T0 + 86_460 },
    updateTime: at(T0 + 86_460),
  },
  { answer: { id: 'b1', status: 'failed', created_at: T0, failed_at: T0 + 5 }, updateTime: at(T0 + 5) },
  { answer: { id: 'b1', status: 'validating' }, updateTime: undefined },
];

const openai = (kind: OpenAIObjectKind) => (name: string, answer: unknown) => eventFromOpenAI(kind, name, answer as OpenAIJobAnswer);

const CASES: Conformance[] = [
  {
    kind: 'openai-batch',
    name: 'openai/batches/batch_abc123',
    accepted: ['openai/batches/batch_abc123', 'openai/batches/batch_6851f1b3e0c08190a1e2f7b8c3d4e5f6'],
    refused: ['batches/batch_abc', 'openai/batch/batch_abc', 'openai/batches/', 'openai/batches/a/b', 'OPENAI/batches/b1', ...HOSTILE],
    states: table(batchStatuses, (status) => ({ id: 'b1', status })),
    map: openai('openai-batch'),
    unknown: { answer: { id: 'b1', status: 'paused' }, raw: 'paused' },
    times: batchTimes,
    outcomes: batchOutcomes,
  },
  {
    kind: 'azure-openai-batch',
    name: 'azure-openai/my-resource/batches/batch_abc123',
    accepted: ['azure-openai/my-resource/batches/batch_abc123', 'azure-openai/r1/batches/batch_1'],
    refused: [
      'azure-openai/batches/batch_1',
      'azure-openai/r1/batch/batch_1',
      'azure-openai/r 1/batches/b',
      'openai/batches/b/x',
      ...HOSTILE,
    ],
    states: table(batchStatuses, (status) => ({ id: 'b1', status })),
    map: openai('azure-openai-batch'),
    unknown: { answer: { id: 'b1', status: 'Running' }, raw: 'Running' },
    times: batchTimes,
    outcomes: batchOutcomes,
  },
  {
    kind: 'openai-response',
    name: 'openai/responses/resp_68af4030592c81938ec0a5fbab4a3e9f',
    accepted: ['openai/responses/resp_68af4030592c81938ec0a5fbab4a3e9f'],
    refused: ['responses/resp_1', 'openai/response/resp_1', 'openai/responses/resp_1/input_items', ...HOSTILE],
    states: table(
      { queued: 'PENDING', in_progress: 'RUNNING', completed: 'SUCCEEDED', failed: 'FAILED', incomplete: 'FAILED', cancelled: 'CANCELLED' },
      (status) => ({ id: 'resp_1', status }),
    ),
    map: openai('openai-response'),
    unknown: { answer: { id: 'resp_1', status: 'requires_action' }, raw: 'requires_action' },
    times: [
      { answer: { id: 'resp_1', status: 'queued', created_at: T0, completed_at: null }, updateTime: at(T0) },
      { answer: { id: 'resp_1', status: 'completed', created_at: T0, completed_at: T0 + 30 }, updateTime: at(T0 + 30) },
    ],
    outcomes: [
      { title: 'a bare completed response: an empty result', answer: { id: 'resp_1', status: 'completed' }, result: {} },
      {
        title: 'a completed response: its tokens (cached and reasoning ones too)',
        answer: {
          id: 'resp_1',
          status: 'completed',
          error: null,
          incomplete_details: null,
          usage: {
            input_tokens: 12,
            input_tokens_details: { cached_tokens: 4 },
            output_tokens: 5,
            output_tokens_details: { reasoning_tokens: 2 },
            total_tokens: 17,
          },
        },
        result: { usage: { inputTokens: 12, outputTokens: 5, totalTokens: 17, cachedTokens: 4, thoughtTokens: 2 } },
      },
      {
        title: 'an incomplete response: the reason (max_output_tokens) in the error',
        answer: {
          id: 'resp_1',
          status: 'incomplete',
          incomplete_details: { reason: 'max_output_tokens' },
          usage: { input_tokens: 12, output_tokens: 64, total_tokens: 76 },
        },
        result: {
          usage: { inputTokens: 12, outputTokens: 64, totalTokens: 76 },
          error: { code: 'max_output_tokens', message: 'the response ended before its output was complete (max_output_tokens)' },
        },
      },
      {
        title: 'an incomplete response: a content filter',
        answer: { id: 'resp_1', status: 'incomplete', incomplete_details: { reason: 'content_filter' } },
        result: { error: { code: 'content_filter', message: 'the response ended before its output was complete (content_filter)' } },
      },
      {
        title: 'a failed response: its error',
        answer: {
          id: 'resp_1',
          status: 'failed',
          error: { code: 'server_error', message: 'The model failed to generate a response.' },
          usage: null,
        },
        result: { error: { code: 'server_error', message: 'The model failed to generate a response.' } },
      },
      { title: 'a cancelled response: an empty result', answer: { id: 'resp_1', status: 'cancelled', error: null }, result: {} },
      {
        title: 'an open response: no result',
        answer: { id: 'resp_1', status: 'in_progress', usage: { input_tokens: 3 } },
        result: undefined,
      },
    ],
  },
  {
    kind: 'openai-video',
    name: 'openai/videos/video_68d7512d07848190b3e45da0ecbebcde',
    accepted: ['openai/videos/video_68d7512d07848190b3e45da0ecbebcde'],
    refused: ['videos/video_1', 'openai/videos/video_1/content', ...HOSTILE],
    states: table({ queued: 'PENDING', in_progress: 'RUNNING', completed: 'SUCCEEDED', failed: 'FAILED' }, (status) => ({
      id: 'video_1',
      status,
    })),
    map: openai('openai-video'),
    unknown: { answer: { id: 'video_1', status: 'cancelled' }, raw: 'cancelled' },
    times: [
      // A completed video's assets expire an hour on: a deadline, never its update time.
      {
        answer: { id: 'video_1', status: 'completed', created_at: T0, completed_at: T0 + 120, expires_at: T0 + 3_720 },
        updateTime: at(T0 + 120),
      },
      {
        answer: { id: 'video_1', status: 'in_progress', created_at: T0, completed_at: null, expires_at: null, progress: 40 },
        updateTime: at(T0),
      },
    ],
    outcomes: [
      { title: 'a completed video: an empty result', answer: { id: 'video_1', status: 'completed', error: null }, result: {} },
      {
        title: 'a failed video: its error',
        answer: { id: 'video_1', status: 'failed', error: { code: 'internal_error', message: 'Video generation failed.' } },
        result: { error: { code: 'internal_error', message: 'Video generation failed.' } },
      },
      { title: 'a failed video without an error: an empty result', answer: { id: 'video_1', status: 'failed' }, result: {} },
    ],
  },
  {
    kind: 'openai-fine-tuning',
    name: 'openai/fine_tuning/jobs/ftjob-abc123',
    accepted: ['openai/fine_tuning/jobs/ftjob-abc123'],
    refused: [
      'openai/fine-tuning/jobs/ftjob-1',
      'openai/fine_tuning/ftjob-1',
      'fine_tuning/jobs/ftjob-1',
      'openai/fine_tuning/jobs/ftjob-1/events',
      ...HOSTILE,
    ],
    states: table(
      {
        validating_files: 'PENDING',
        queued: 'PENDING',
        running: 'RUNNING',
        succeeded: 'SUCCEEDED',
        failed: 'FAILED',
        cancelled: 'CANCELLED',
      },
      (status) => ({ id: 'ftjob-1', status }),
    ),
    map: openai('openai-fine-tuning'),
    unknown: { answer: { id: 'ftjob-1', status: 'paused' }, raw: 'paused' },
    times: [
      { answer: { id: 'ftjob-1', status: 'running', created_at: T0, finished_at: null, estimated_finish: T0 + 1_800 }, updateTime: at(T0) },
      { answer: { id: 'ftjob-1', status: 'succeeded', created_at: T0, finished_at: T0 + 1_800 }, updateTime: at(T0 + 1_800) },
    ],
    outcomes: [
      {
        title: 'a fine-tuning job that succeeded: the model it made, its result file',
        answer: {
          id: 'ftjob-1',
          status: 'succeeded',
          fine_tuned_model: 'ft:gpt-4o-mini-2024-07-18:ratchet::a1b2',
          result_files: ['file-metrics'],
          error: null,
        },
        result: { fineTunedModel: 'ft:gpt-4o-mini-2024-07-18:ratchet::a1b2', outputFileId: 'file-metrics' },
      },
      {
        title: 'a failed fine-tuning job: its error, no model',
        answer: {
          id: 'ftjob-1',
          status: 'failed',
          fine_tuned_model: null,
          result_files: [],
          error: { code: 'invalid_training_file', message: 'The training file is not valid JSONL.', param: 'training_file' },
        },
        result: { error: { code: 'invalid_training_file', message: 'The training file is not valid JSONL.' } },
      },
      {
        title: 'a cancelled fine-tuning job: an empty result',
        answer: { id: 'ftjob-1', status: 'cancelled', fine_tuned_model: null },
        result: {},
      },
      { title: 'a running job: no result', answer: { id: 'ftjob-1', status: 'running', result_files: [] }, result: undefined },
    ],
  },
  {
    kind: 'openai-eval-run',
    name: 'openai/evals/eval_67abd54d9b0081909a86353f6fb9317a/runs/evalrun_67abd54d60ec8190832b46859da808f7',
    accepted: ['openai/evals/eval_67abd54d9b0081909a86353f6fb9317a/runs/evalrun_67abd54d60ec8190832b46859da808f7'],
    refused: [
      'openai/evals/eval_1',
      'openai/evals/runs/evalrun_1',
      'openai/evals/eval_1/runs/',
      'openai/evals/eval_1/run/evalrun_1',
      ...HOSTILE,
    ],
    states: table(
      { queued: 'PENDING', in_progress: 'RUNNING', completed: 'SUCCEEDED', failed: 'FAILED', canceled: 'CANCELLED' },
      (status) => ({ id: 'evalrun_1', eval_id: 'eval_1', status }),
    ),
    map: openai('openai-eval-run'),
    // Evals spell it `canceled`: the other spelling is not theirs.
    unknown: { answer: { id: 'evalrun_1', status: 'cancelled' }, raw: 'cancelled' },
    times: [{ answer: { id: 'evalrun_1', status: 'completed', created_at: T0 }, updateTime: at(T0) }],
    outcomes: [
      {
        title: 'a completed run: passed as succeeded, failed and errored as failed, tokens summed over its models, its report',
        answer: {
          id: 'evalrun_1',
          eval_id: 'eval_1',
          status: 'completed',
          error: null,
          result_counts: { total: 10, passed: 7, failed: 2, errored: 1 },
          per_model_usage: [
            {
              model_name: 'gpt-4o-mini',
              invocation_count: 10,
              prompt_tokens: 900,
              completion_tokens: 300,
              total_tokens: 1_200,
              cached_tokens: 0,
            },
            {
              model_name: 'o3-mini',
              invocation_count: 10,
              prompt_tokens: 100,
              completion_tokens: 50,
              total_tokens: 150,
              cached_tokens: 20,
            },
          ],
          report_url: 'https://platform.openai.com/evaluation/evals/eval_1?run_id=evalrun_1',
        },
        result: {
          requestCounts: { total: 10, succeeded: 7, failed: 3 },
          usage: { inputTokens: 1_000, outputTokens: 350, totalTokens: 1_350, cachedTokens: 20 },
          outputUri: 'https://platform.openai.com/evaluation/evals/eval_1?run_id=evalrun_1',
        },
      },
      {
        title: 'a failed run: its error; counts without `errored` give no `failed`',
        answer: {
          id: 'evalrun_1',
          status: 'failed',
          error: { code: 'invalid_data_source', message: 'The data source could not be read.' },
          result_counts: { total: 0, passed: 0, failed: 0 },
          per_model_usage: [],
        },
        result: {
          requestCounts: { total: 0, succeeded: 0 },
          error: { code: 'invalid_data_source', message: 'The data source could not be read.' },
        },
      },
      { title: 'a canceled run: an empty result', answer: { id: 'evalrun_1', status: 'canceled' }, result: {} },
      {
        title: 'a run in progress: no result',
        answer: { id: 'evalrun_1', status: 'in_progress', result_counts: { total: 4, passed: 3 } },
        result: undefined,
      },
    ],
  },
  {
    kind: 'anthropic-batch',
    name: 'anthropic/messages/batches/msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d',
    accepted: ['anthropic/messages/batches/msgbatch_01HkcTjaV5uDC8jWR4ZsDV8d'],
    refused: ['anthropic/batches/msgbatch_1', 'messages/batches/msgbatch_1', 'anthropic/messages/batches/msgbatch_1/results', ...HOSTILE],
    states: [
      { answer: { processing_status: 'in_progress' }, state: 'RUNNING', providerState: 'in_progress' },
      { answer: { processing_status: 'canceling' }, state: 'RUNNING', providerState: 'canceling' },
      ...(
        [
          // Any success: SUCCEEDED, whatever else became of the other requests.
          [{ succeeded: 9, errored: 1, canceled: 0, expired: 0 }, 'SUCCEEDED'],
          [{ succeeded: 1, errored: 3, canceled: 3, expired: 3 }, 'SUCCEEDED'],
          [{ succeeded: 0, errored: 0, canceled: 10, expired: 0 }, 'CANCELLED'],
          [{ succeeded: 0, errored: 0, canceled: 0, expired: 10 }, 'EXPIRED'],
          [{ succeeded: 0, errored: 10, canceled: 0, expired: 0 }, 'FAILED'],
          [{ succeeded: 0, errored: 0, canceled: 4, expired: 6 }, 'FAILED'],
          [{ succeeded: 0, errored: 1, canceled: 9, expired: 0 }, 'FAILED'],
        ] as const
      ).map(([counts, state]) => ({
        answer: { processing_status: 'ended', request_counts: { processing: 0, ...counts } },
        state,
        providerState: 'ended',
      })),
    ],
    map: (name, answer) => eventFromAnthropic(name, answer as AnthropicBatchAnswer),
    unknown: { answer: { processing_status: 'archived' }, raw: 'archived' },
    times: [
      {
        answer: {
          processing_status: 'in_progress',
          created_at: rfc3339(T0),
          cancel_initiated_at: null,
          ended_at: null,
          expires_at: rfc3339(T0 + 86_400),
        },
        updateTime: at(T0),
      },
      {
        answer: { processing_status: 'canceling', created_at: rfc3339(T0), cancel_initiated_at: rfc3339(T0 + 60) },
        updateTime: at(T0 + 60),
      },
      {
        answer: {
          processing_status: 'ended',
          request_counts: { processing: 0, succeeded: 0, errored: 0, canceled: 10, expired: 0 },
          created_at: rfc3339(T0),
          cancel_initiated_at: rfc3339(T0 + 60),
          ended_at: rfc3339(T0 + 90),
          archived_at: rfc3339(T0 + 600),
        },
        updateTime: at(T0 + 90),
      },
      // Anthropic's offsets read as the instant they name.
      {
        answer: { processing_status: 'in_progress', created_at: '2026-01-02T03:04:05.5+02:00' },
        updateTime: '2026-01-02T01:04:05.500000000Z',
      },
    ],
    outcomes: [
      {
        title: 'an ended batch: every count (errored as failed, total their sum), its results URL',
        answer: {
          processing_status: 'ended',
          request_counts: { processing: 0, succeeded: 6, errored: 1, canceled: 2, expired: 1 },
          results_url: 'https://api.anthropic.com/v1/messages/batches/msgbatch_1/results',
        },
        result: {
          requestCounts: { total: 10, succeeded: 6, failed: 1, canceled: 2, expired: 1 },
          outputUri: 'https://api.anthropic.com/v1/messages/batches/msgbatch_1/results',
        },
      },
      {
        title: 'an ended batch without counts or URL: an empty result',
        answer: { processing_status: 'ended', results_url: null },
        result: {},
      },
      {
        title: 'a batch canceling: no result',
        answer: { processing_status: 'canceling', request_counts: { processing: 4, succeeded: 6, errored: 0, canceled: 0, expired: 0 } },
        result: undefined,
      },
    ],
  },
  {
    kind: 'bedrock-batch',
    name: 'bedrock/us-east-1/123456789012/model-invocation-jobs/abcdefghwxyz',
    accepted: [
      'bedrock/us-east-1/123456789012/model-invocation-jobs/abcdefghwxyz',
      'bedrock/ap-southeast-2/000000000000/model-invocation-jobs/x1',
    ],
    refused: [
      'bedrock/us-east-1/12345/model-invocation-jobs/abc',
      'bedrock/US-EAST-1/123456789012/model-invocation-jobs/abc',
      'bedrock/us-east-1/123456789012/model-invocation-job/abc',
      'bedrock/123456789012/model-invocation-jobs/abc',
      'arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc',
      ...HOSTILE,
    ],
    states: table(
      {
        Submitted: 'PENDING',
        Validating: 'PENDING',
        Scheduled: 'PENDING',
        InProgress: 'RUNNING',
        Stopping: 'RUNNING',
        Completed: 'SUCCEEDED',
        PartiallyCompleted: 'SUCCEEDED',
        Failed: 'FAILED',
        Stopped: 'CANCELLED',
        Expired: 'EXPIRED',
      },
      (status) => ({ status }),
    ),
    map: (name, answer) => eventFromBedrock(name, answer as BedrockJobAnswer),
    unknown: { answer: { status: 'Paused' }, raw: 'Paused' },
    times: [
      // The SDK makes Dates of the times; lastModifiedTime alone is the job's update time.
      {
        answer: { status: 'InProgress', submitTime: new Date(T0 * 1000), lastModifiedTime: new Date((T0 + 180) * 1000) },
        updateTime: at(T0 + 180),
      },
      {
        answer: {
          status: 'Completed',
          lastModifiedTime: new Date((T0 + 780) * 1000),
          endTime: new Date((T0 + 780) * 1000),
          jobExpirationTime: new Date((T0 + 86_400) * 1000),
        },
        updateTime: at(T0 + 780),
      },
      { answer: { status: 'Submitted' }, updateTime: undefined },
    ],
    outcomes: [
      {
        title: 'a partly completed job: where its output is, its records by outcome',
        answer: {
          status: 'PartiallyCompleted',
          outputDataConfig: { s3OutputDataConfig: { s3Uri: 's3://out/job/' } },
          totalRecordCount: 100,
          processedRecordCount: 100,
          successRecordCount: 90,
          errorRecordCount: 10,
        },
        result: { outputUri: 's3://out/job/', requestCounts: { total: 100, succeeded: 90, failed: 10 } },
      },
      {
        title: "a failed job: Bedrock's message as the error",
        answer: {
          status: 'Failed',
          message: 'Validation failed: the input file is not valid JSONL.',
          outputDataConfig: { s3OutputDataConfig: { s3Uri: 's3://out/job/' } },
        },
        result: { outputUri: 's3://out/job/', error: { message: 'Validation failed: the input file is not valid JSONL.' } },
      },
      { title: 'a stopped job: its message is no error', answer: { status: 'Stopped', message: 'Stopped by the user' }, result: {} },
      {
        title: 'a job in progress: no result',
        answer: { status: 'InProgress', totalRecordCount: 100, successRecordCount: 40 },
        result: undefined,
      },
    ],
  },
  {
    kind: 'batch',
    name: 'batches/123',
    accepted: ['batches/123', 'batches/abc-1.x'],
    refused: ['batch/123', 'batches/../x', 'openai/batches/1/x', ...HOSTILE],
    states: table(
      {
        JOB_STATE_QUEUED: 'PENDING',
        JOB_STATE_PENDING: 'PENDING',
        JOB_STATE_RUNNING: 'RUNNING',
        JOB_STATE_UPDATING: 'RUNNING',
        JOB_STATE_PAUSED: 'RUNNING',
        JOB_STATE_CANCELLING: 'RUNNING',
        JOB_STATE_SUCCEEDED: 'SUCCEEDED',
        JOB_STATE_PARTIALLY_SUCCEEDED: 'SUCCEEDED',
        JOB_STATE_FAILED: 'FAILED',
        JOB_STATE_CANCELLED: 'CANCELLED',
        JOB_STATE_EXPIRED: 'EXPIRED',
      },
      (state) => ({ state }),
    ),
    map: (name, answer) => eventFromBatch(name, 'batch', answer as BatchAnswer),
    unknown: { answer: { state: 'JOB_STATE_ARCHIVED' }, raw: 'JOB_STATE_ARCHIVED' },
    times: [
      { answer: { state: 'JOB_STATE_RUNNING', updateTime: rfc3339(T0) }, updateTime: at(T0) },
      { answer: { state: 'JOB_STATE_RUNNING' }, updateTime: undefined },
    ],
    outcomes: [
      // Gemini's answers carry their outcome (its webhooks too): a bare terminal answer has no result to wait for.
      { title: 'a bare succeeded batch: no result', answer: { state: 'JOB_STATE_SUCCEEDED' }, result: undefined },
      {
        title: 'a succeeded batch: its file and counts',
        answer: {
          state: 'JOB_STATE_SUCCEEDED',
          dest: { fileName: 'files/out' },
          batchStats: { requestCount: '3', successfulRequestCount: '3' },
        },
        result: { outputUri: 'files/out', batchStats: { requestCount: 3, successfulRequestCount: 3 } },
      },
    ],
  },
  {
    kind: 'interaction',
    name: 'interactions/v1_abc',
    accepted: ['interactions/v1_abc'],
    refused: ['interaction/v1', 'interactions/', 'interactions/a/b', ...HOSTILE],
    states: table(
      {
        queued: 'PENDING',
        in_progress: 'RUNNING',
        requires_action: 'REQUIRES_ACTION',
        idle: 'REQUIRES_ACTION',
        completed: 'SUCCEEDED',
        failed: 'FAILED',
        budget_exceeded: 'FAILED',
        incomplete: 'FAILED',
        requires_continuation: 'FAILED',
        cancelled: 'CANCELLED',
      },
      (status) => ({ status }),
    ),
    map: (name, answer) => eventFromInteraction(name, 'interaction', answer as InteractionAnswer),
    unknown: { answer: { status: 'paused' }, raw: 'paused' },
    times: [{ answer: { status: 'in_progress', updated: rfc3339(T0) }, updateTime: at(T0) }],
    outcomes: [
      {
        title: 'a completed interaction: its tokens',
        answer: { status: 'completed', usage: { total_input_tokens: 5, total_output_tokens: 7, total_tokens: 12 } },
        result: { usage: { inputTokens: 5, outputTokens: 7, totalTokens: 12 } },
      },
    ],
  },
];

describe.each(CASES)('the provider conformance of $kind', (c) => {
  it.each(c.accepted)('accepts the name %j as its kind', (name) => {
    expect(isNameOfKind(name, c.kind)).toBe(true);
    expect(kindOfName(name)).toBe(c.kind);
  });

  it.each(c.refused)('refuses the name %j', (name) => {
    expect(isNameOfKind(name, c.kind)).toBe(false);
  });

  it.each(c.states.map((s) => [s.providerState, s.state, s.answer] as const))(
    'maps %s to %s, the word kept as providerState, as a poll of the name it was given',
    (providerState, state, answer) => {
      const event = c.map(c.name, answer);
      expect(event).toMatchObject({ name: c.name, kind: c.kind, state, providerState, source: 'poll' });
      expect(event.resultPending).toBeUndefined();
    },
  );

  it('throws UnknownProviderStateError, with the word, for a state word not in its table', () => {
    let thrown: unknown;
    try {
      c.map(c.name, c.unknown.answer);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toMatchObject({ name: 'UnknownProviderStateError', raw: c.unknown.raw });
  });

  it.each(c.times.map((t) => [t.updateTime, t.answer] as const))('takes %s as the update time', (updateTime, answer) => {
    const event = c.map(c.name, answer);
    expect(event.updateTime).toBe(updateTime);
    if (updateTime === undefined) expect(Object.keys(event)).not.toContain('updateTime');
  });

  it.each(c.outcomes.map((o) => [o.title, o.result, o.answer] as const))('%s', (_title, result, answer) => {
    const event = c.map(c.name, answer);
    expect(event.result).toEqual(result);
    if (result === undefined) expect(Object.keys(event)).not.toContain('result');
  });
});

describe("the providers that announce an end without its outcome (OpenAI's webhooks): every terminal poll answer has a result", () => {
  it.each(
    CASES.filter((c) => !['batch', 'interaction'].includes(c.kind)).flatMap((c) =>
      c.states.map((s) => [c.kind, s.providerState, s.state, c, s.answer] as const),
    ),
  )('%s %s (%s)', (_kind, _word, state, c, answer) => {
    const event = c.map(c.name, answer);
    if (['SUCCEEDED', 'FAILED', 'CANCELLED', 'EXPIRED'].includes(state)) expect(event.result).toBeTypeOf('object');
    else expect(event.result).toBeUndefined();
  });
});

describe("OpenAI's webhook events", () => {
  const delivery = (type: string, id: string, createdAt = T0 + 900) => ({
    id: 'evt_685343a1381c819085d44c354e1b330e',
    object: 'event',
    created_at: createdAt,
    type,
    data: { id },
  });

  it.each([
    ['batch.completed', 'batch_1', 'openai-batch', 'openai/batches/batch_1', 'SUCCEEDED'],
    ['batch.failed', 'batch_1', 'openai-batch', 'openai/batches/batch_1', 'FAILED'],
    ['batch.expired', 'batch_1', 'openai-batch', 'openai/batches/batch_1', 'EXPIRED'],
    ['batch.cancelled', 'batch_1', 'openai-batch', 'openai/batches/batch_1', 'CANCELLED'],
    ['response.completed', 'resp_1', 'openai-response', 'openai/responses/resp_1', 'SUCCEEDED'],
    ['response.failed', 'resp_1', 'openai-response', 'openai/responses/resp_1', 'FAILED'],
    ['response.incomplete', 'resp_1', 'openai-response', 'openai/responses/resp_1', 'FAILED'],
    ['response.cancelled', 'resp_1', 'openai-response', 'openai/responses/resp_1', 'CANCELLED'],
    ['video.completed', 'video_1', 'openai-video', 'openai/videos/video_1', 'SUCCEEDED'],
    ['video.failed', 'video_1', 'openai-video', 'openai/videos/video_1', 'FAILED'],
    ['fine_tuning.job.succeeded', 'ftjob-1', 'openai-fine-tuning', 'openai/fine_tuning/jobs/ftjob-1', 'SUCCEEDED'],
    ['fine_tuning.job.failed', 'ftjob-1', 'openai-fine-tuning', 'openai/fine_tuning/jobs/ftjob-1', 'FAILED'],
    ['fine_tuning.job.cancelled', 'ftjob-1', 'openai-fine-tuning', 'openai/fine_tuning/jobs/ftjob-1', 'CANCELLED'],
  ] as const)('maps %s of %s to %s %s %s, its outcome left to a poll', (type, id, kind, name, state) => {
    expect(eventFromOpenAIWebhook(delivery(type, id))).toEqual({
      kind,
      event: {
        name,
        kind,
        state,
        providerState: type,
        updateTime: at(T0 + 900),
        source: 'webhook',
        eventId: 'evt_685343a1381c819085d44c354e1b330e',
        resultPending: true,
      },
    });
  });

  it.each([
    ['eval.run.succeeded', 'SUCCEEDED'],
    ['eval.run.failed', 'FAILED'],
    ['eval.run.canceled', 'CANCELLED'],
  ] as const)("maps %s to %s by the run's id alone (the route finds the tracked run)", (type, state) => {
    expect(eventFromOpenAIWebhook(delivery(type, 'evalrun_1'))).toEqual({
      kind: 'openai-eval-run',
      runId: 'evalrun_1',
      event: {
        kind: 'openai-eval-run',
        state,
        providerState: type,
        updateTime: at(T0 + 900),
        source: 'webhook',
        eventId: 'evt_685343a1381c819085d44c354e1b330e',
        resultPending: true,
      },
    });
  });

  it("maps an Azure OpenAI resource's batch events to its batches, and nothing else of it", () => {
    expect(eventFromOpenAIWebhook(delivery('batch.cancelled', 'batch_9'), 'my-resource')?.event).toMatchObject({
      name: 'azure-openai/my-resource/batches/batch_9',
      kind: 'azure-openai-batch',
      state: 'CANCELLED',
      resultPending: true,
    });
    expect(eventFromOpenAIWebhook(delivery('response.completed', 'resp_1'), 'my-resource')).toBeUndefined();
  });

  it.each(['realtime.call.incoming', 'batch.succeeded', 'eval.run.cancelled', 'response.created', '', undefined])(
    'leaves the type %j unmapped',
    (type) => {
      expect(eventFromOpenAIWebhook({ ...delivery('x', 'batch_1'), type })).toBeUndefined();
    },
  );

  it.each([
    ['no data.id', { id: 'evt_1', type: 'batch.completed', created_at: T0, data: {} }],
    ['no created_at', { id: 'evt_1', type: 'batch.completed', data: { id: 'batch_1' } }],
    ['an id that makes no name', { id: 'evt_1', type: 'batch.completed', created_at: T0, data: { id: '../files/x' } }],
    ['an eval run id that makes no name', { id: 'evt_1', type: 'eval.run.failed', created_at: T0, data: { id: 'a/b' } }],
  ])('throws MalformedEventError for a mapped type with %s', (_what, body) => {
    expect(() => eventFromOpenAIWebhook(body)).toThrow(MalformedEventError);
  });
});

describe("Bedrock's EventBridge events (Batch Inference Job State Change)", () => {
  const detail = (status: string) => ({
    version: '0.0',
    accountId: '123456789012',
    batchJobName: 'ratchet-batch-1',
    batchJobArn: 'arn:aws:bedrock:eu-west-3:123456789012:model-invocation-job/abcdefghwxyz',
    batchModelId: 'anthropic.claude-3-haiku-20240307-v1:0',
    status,
  });

  it.each([
    ['Submitted', 'PENDING', false],
    ['InProgress', 'RUNNING', false],
    ['Completed', 'SUCCEEDED', true],
    ['PartiallyCompleted', 'SUCCEEDED', true],
    ['Failed', 'FAILED', true],
    ['Stopped', 'CANCELLED', true],
    ['Expired', 'EXPIRED', true],
  ] as const)('maps %s to %s, without a time (the poll decides), a terminal one waiting for its outcome', (status, state, pending) => {
    expect(eventFromBedrockEvent(detail(status), 'c8f9c4b5-76e5-d76a-f980-7011e206042b')).toEqual({
      name: 'bedrock/eu-west-3/123456789012/model-invocation-jobs/abcdefghwxyz',
      kind: 'bedrock-batch',
      state,
      providerState: status,
      source: 'webhook',
      eventId: 'c8f9c4b5-76e5-d76a-f980-7011e206042b',
      ...(pending && { resultPending: true }),
    });
  });

  it('throws UnknownProviderStateError for a status not in the table, MalformedEventError for a detail with no job ARN', () => {
    expect(() => eventFromBedrockEvent(detail('Paused'))).toThrow(
      expect.objectContaining({ name: 'UnknownProviderStateError', raw: 'Paused' }),
    );
    expect(() => eventFromBedrockEvent({ ...detail('Completed'), batchJobArn: undefined })).toThrow(MalformedEventError);
    expect(() =>
      eventFromBedrockEvent({ ...detail('Completed'), batchJobArn: 'arn:aws:bedrock:us-east-1:123:model-invocation-job/x' }),
    ).toThrow(MalformedEventError);
  });

  it("rebuilds a job's ARN from its name, in its region's partition", () => {
    expect(bedrockJobOfName('bedrock/us-east-1/123456789012/model-invocation-jobs/abc').arn).toBe(
      'arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc',
    );
    expect(bedrockJobOfName('bedrock/cn-north-1/123456789012/model-invocation-jobs/abc').arn).toBe(
      'arn:aws-cn:bedrock:cn-north-1:123456789012:model-invocation-job/abc',
    );
    expect(bedrockJobOfName('bedrock/us-gov-west-1/123456789012/model-invocation-jobs/abc').arn).toBe(
      'arn:aws-us-gov:bedrock:us-gov-west-1:123456789012:model-invocation-job/abc',
    );
  });
});
