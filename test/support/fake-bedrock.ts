/**
 * A fake Amazon Bedrock control plane on 127.0.0.1, enough for the real `@aws-sdk/client-bedrock` to create, get
 * and list batch inference jobs (model invocation jobs): `POST /model-invocation-job`, `GET
 * /model-invocation-job/{jobIdentifier}` (the job's id or its ARN, URL-encoded) and `GET /model-invocation-jobs`.
 * The signature is not checked; the region a request was signed for (its SigV4 scope) places the jobs it creates.
 * A test moves a job along with `set` (`bedrockJob` makes one as the API answers it); throttling is a 429
 * `ThrottlingException`, as AWS answers it (`x-amzn-errortype`).
 */

import { randomBytes, randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { GetModelInvocationJobResponse } from '@aws-sdk/client-bedrock';
import { answer, defined, fieldsOf, listen, newestFirst, type Over, pageOf, pause, RateLimits } from './fake-http.ts';

export interface FakeBedrock {
  /** The endpoint for `new BedrockClient({ endpoint: url, region, credentials })`. */
  url: string;
  /** Sets (or replaces) a job's object as the API answers it (`jobArn` in it; times ISO 8601). */
  set(job: Record<string, unknown>): void;
  /** The job by its ARN or its id. */
  get(jobArnOrId: string): Record<string, unknown> | undefined;
  /** Every request: method, path as sent (without query: an ARN in it stays URL-encoded), the signer's access key and region, time. */
  requests: Array<{ method: string; path: string; accessKeyId: string | undefined; region: string | undefined; at: number }>;
  /** Answers the next `count` requests 429 `ThrottlingException` (Infinity: until cleared with 0). */
  rateLimit(count: number): void;
  /** Delay before each answer (default 0). */
  latencyMs: number;
  close(): Promise<void>;
}

const ITEM = /^\/model-invocation-job\/([^/]+)$/;
/** The account the jobs a request creates belong to, unless the fake is started with another. */
const ACCOUNT = '123456789012';

/** Starts the fake; `close()` stops it. */
export async function startFakeBedrock(options: { latencyMs?: number; account?: string } = {}): Promise<FakeBedrock> {
  const account = options.account ?? ACCOUNT;
  const jobs = new Map<string, Record<string, unknown>>();
  /** The job each create's idempotency token made, so a retried create answers the same job. */
  const byToken = new Map<string, string>();
  const limits = new RateLimits();
  const requests: FakeBedrock['requests'] = [];

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const method = req.method ?? 'GET';
    // SigV4: `Credential=AKID/yyyymmdd/region/bedrock/aws4_request`.
    const [, accessKeyId, region] = /Credential=([^/]+)\/\d{8}\/([^/]+)\//.exec(req.headers.authorization ?? '') ?? [];
    requests.push({ method, path: url.pathname, accessKeyId, region, at: Date.now() });
    const fields = method === 'POST' ? await fieldsOf(req) : {};
    await pause(fake.latencyMs);
    const headers = { 'x-amzn-requestid': randomUUID() };
    const fail = (status: number, type: string, message: string) =>
      answer(res, status, { message }, { ...headers, 'x-amzn-errortype': `${type}:http://internal.amazon.com/coral/com.amazon.bedrock/` });

    if (!accessKeyId) return fail(403, 'MissingAuthenticationTokenException', 'Missing Authentication Token');
    if (limits.take('')) return fail(429, 'ThrottlingException', 'Too many requests, please wait before trying again.');

    if (url.pathname === '/model-invocation-job' && method === 'POST') {
      const missing = ['jobName', 'roleArn', 'modelId', 'inputDataConfig', 'outputDataConfig'].filter(
        (field) => fields[field] === undefined,
      );
      if (missing.length > 0) return fail(400, 'ValidationException', `Missing required fields: ${missing.join(', ')}`);
      const token = typeof fields.clientRequestToken === 'string' ? fields.clientRequestToken : undefined;
      const earlier = token && byToken.get(token);
      if (earlier) return answer(res, 200, { jobArn: jobs.get(earlier)?.jobArn }, headers);
      const { jobName, roleArn, modelId, inputDataConfig, outputDataConfig, timeoutDurationInHours, vpcConfig, modelInvocationType } =
        fields;
      const job = bedrockJob(
        defined({
          status: 'Submitted',
          jobName,
          roleArn,
          modelId,
          inputDataConfig,
          outputDataConfig,
          clientRequestToken: token,
          timeoutDurationInHours,
          vpcConfig,
          modelInvocationType,
        }),
        { region: region ?? 'us-east-1', account },
      );
      const id = idOf(String(job.jobArn));
      jobs.set(id, job);
      if (token) byToken.set(token, id);
      return answer(res, 200, { jobArn: job.jobArn }, headers);
    }
    if (url.pathname === '/model-invocation-jobs' && method === 'GET') {
      const query = url.searchParams;
      const after = query.get('submitTimeAfter');
      const before = query.get('submitTimeBefore');
      const chosen = [...jobs.values()].filter(
        (job) =>
          (!query.get('statusEquals') || job.status === query.get('statusEquals')) &&
          (!query.get('nameContains') || String(job.jobName).includes(query.get('nameContains') as string)) &&
          (!after || Date.parse(String(job.submitTime)) > Date.parse(after)) &&
          (!before || Date.parse(String(job.submitTime)) < Date.parse(before)),
      );
      // Sorted by creation time only (the one sortBy there is), newest first unless asked otherwise.
      const all = newestFirst(chosen, (job) => Date.parse(String(job.submitTime)));
      if (query.get('sortOrder') === 'Ascending') all.reverse();
      const limit = Math.min(Math.max(Number(query.get('maxResults')) || 1000, 1), 1000);
      // The token is the last job answered: opaque to the caller, as AWS's are.
      const { page, more } = pageOf(all, (job) => String(job.jobArn), { limit, after: query.get('nextToken') ?? undefined });
      const last = page.at(-1);
      return answer(res, 200, { invocationJobSummaries: page, ...(more && last && { nextToken: last.jobArn }) }, headers);
    }
    const identifier = ITEM.exec(url.pathname)?.[1];
    if (identifier !== undefined && method === 'GET') {
      const job = jobs.get(idOf(decodeURIComponent(identifier)));
      if (!job) return fail(404, 'ResourceNotFoundException', 'Could not find the specified model invocation job');
      return answer(res, 200, job, headers);
    }
    fail(404, 'UnknownOperationException', `No operation at ${method} ${url.pathname}`);
  }

  const server = await listen(handle);
  const fake: FakeBedrock = {
    url: server.origin,
    set(job) {
      if (typeof job.jobArn !== 'string') throw new Error('a Bedrock job needs its jobArn');
      jobs.set(idOf(job.jobArn), structuredClone(job));
    },
    get(jobArnOrId) {
      const job = jobs.get(idOf(jobArnOrId));
      return job && structuredClone(job);
    },
    requests,
    rateLimit(count) {
      limits.set('', count, 0);
    },
    latencyMs: options.latencyMs ?? 0,
    close: () => server.close(),
  };
  return fake;
}

/** A job's id from its ARN (`…:model-invocation-job/{id}`), or the id itself. */
function idOf(jobArnOrId: string): string {
  return jobArnOrId.slice(jobArnOrId.lastIndexOf('/') + 1);
}

/** Seconds from submission to the last change, by status: a minute a step, ten to run, the window to expire. */
const LAST_CHANGE_AFTER: Record<string, number> = {
  Submitted: 0,
  Validating: 60,
  Failed: 60,
  Scheduled: 120,
  InProgress: 180,
  Stopping: 240,
  Stopped: 300,
  Completed: 780,
  PartiallyCompleted: 780,
  Expired: 24 * 3_600,
};

const TERMINAL = new Set(['Completed', 'PartiallyCompleted', 'Failed', 'Stopped', 'Expired']);

/** Record counts by status: what a job of 100 records has done by then (none before it runs). */
const RECORDS: Record<string, [number, number, number]> = {
  InProgress: [40, 40, 0],
  Stopping: [30, 30, 0],
  Stopped: [30, 30, 0],
  Completed: [100, 100, 0],
  PartiallyCompleted: [100, 90, 10],
  Expired: [60, 60, 0],
};

/** The times are ISO 8601 strings on the wire; the SDK makes Dates of them. */
type BedrockJobOver = Over<
  Omit<GetModelInvocationJobResponse, '$metadata' | 'submitTime' | 'lastModifiedTime' | 'endTime' | 'jobExpirationTime'>
> & {
  submitTime?: string;
  lastModifiedTime?: string;
  endTime?: string;
  jobExpirationTime?: string;
};

/**
 * A batch inference job as `GetModelInvocationJob` answers it: `arn:aws:bedrock:{region}:{account}:model-invocation-job/{id}`,
 * times ISO 8601 (the last change now unless `submitTime` places it), `endTime`, record counts and a failure's
 * `message` those of its status.
 */
export function bedrockJob(over: BedrockJobOver = {}, where: { region?: string; account?: string } = {}): Record<string, unknown> {
  const status = String(over.status ?? 'Submitted');
  const region = where.region ?? 'us-east-1';
  const account = where.account ?? ACCOUNT;
  const id = typeof over.jobArn === 'string' ? idOf(over.jobArn) : [...randomBytes(12)].map((byte) => (byte % 36).toString(36)).join('');
  const jobName = typeof over.jobName === 'string' ? over.jobName : `ratchet-batch-${id.slice(0, 6)}`;
  const changeAfter = (LAST_CHANGE_AFTER[status] ?? 0) * 1000;
  const submitted = typeof over.submitTime === 'string' ? Date.parse(over.submitTime) : Date.now() - changeAfter;
  const hours = typeof over.timeoutDurationInHours === 'number' ? over.timeoutDurationInHours : 24;
  const iso = (ms: number) => new Date(ms).toISOString();
  const records = RECORDS[status];
  return defined({
    jobArn: `arn:aws:bedrock:${region}:${account}:model-invocation-job/${id}`,
    jobName,
    modelId: 'anthropic.claude-3-haiku-20240307-v1:0',
    roleArn: `arn:aws:iam::${account}:role/ratchet-bedrock-batch`,
    status,
    message: status === 'Failed' ? 'Validation failed: the input file is not valid JSONL.' : undefined,
    submitTime: iso(submitted),
    lastModifiedTime: iso(submitted + changeAfter),
    endTime: TERMINAL.has(status) ? iso(submitted + changeAfter) : undefined,
    inputDataConfig: { s3InputDataConfig: { s3InputFormat: 'JSONL', s3Uri: `s3://ratchet-batch-input/${jobName}.jsonl` } },
    outputDataConfig: { s3OutputDataConfig: { s3Uri: `s3://ratchet-batch-output/${jobName}/` } },
    timeoutDurationInHours: hours,
    jobExpirationTime: iso(submitted + hours * 3_600_000),
    totalRecordCount: records && 100,
    processedRecordCount: records?.[0],
    successRecordCount: records?.[1],
    errorRecordCount: records?.[2],
    ...over,
  });
}
