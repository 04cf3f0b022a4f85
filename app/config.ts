/**
 * The one config loader. Same variable names in Lambda and in the local
 * runtime (see README, "Configuration").
 */
import * as z from 'zod/mini';
import en from 'zod/v4/locales/en.js';
import { geminiKeysOf } from '../core/credentials.ts';
import { DEFAULT_OVERDUE_AFTER, OVERDUE_NAMES, type OverdueLimits, overdueLimitsOf } from '../core/overdue.ts';

// zod/mini (a tenth of zod's size in the Lambda bundles), with its English messages ("Too big: expected number to be <=65535").
z.config(en());
// A few helpers keep the table readable.
const text = () => z.string().check(z.minLength(1));
const optional = <T extends z.ZodMiniType>(schema: T) => z.optional(schema);
const withDefault = <T extends z.ZodMiniType>(schema: T, value: z.output<T>) => z._default(schema, value as never);
const number = (...checks: Array<z.core.CheckFn<number> | z.core.$ZodCheck<number>>) => z.coerce.number().check(...(checks as never[]));
const integer = z.refine<number>(Number.isInteger, 'expected an integer');
/** An http or https URL: fetch would refuse anything else later, in the middle of a run. */
const httpUrl = () => z.url({ protocol: /^https?$/ });

/** Where Google publishes the keys of dynamic-webhook signatures. */
export const GOOGLE_WEBHOOK_KEYS_URL = 'https://generativelanguage.googleapis.com/.well-known/jwks.json';
/** The issuer dynamic-webhook JWTs are expected to carry unless GEMINI_WEBHOOK_ISSUER says otherwise. */
export const GOOGLE_WEBHOOK_ISSUER = 'https://generativelanguage.googleapis.com';

/** A setting that holds several values (secrets, tokens, URLs, schemes): separated by spaces or commas. */
export function listOf(value: string): string[] {
  return value.split(/[\s,]+/).filter(Boolean);
}

export const WEBHOOK_SCHEMES = ['hmac', 'v1a', 'jwt'] as const;
export type WebhookScheme = (typeof WEBHOOK_SCHEMES)[number];

/** `hmac,v1a` → the schemes; undefined when a value is not one (or none is given). */
export function webhookSchemes(value: string): WebhookScheme[] | undefined {
  const names = listOf(value);
  if (names.length === 0 || names.some((name) => !(WEBHOOK_SCHEMES as readonly string[]).includes(name))) return undefined;
  return names as WebhookScheme[];
}

/** PUBLIC_URL's URLs (space- or comma-separated); none when one is not http(s). */
export function publicUrls(value: string | undefined): URL[] {
  const urls: URL[] = [];
  for (const entry of listOf(value ?? '')) {
    try {
      const url = new URL(entry);
      if (url.protocol !== 'http:' && url.protocol !== 'https:') return [];
      urls.push(url);
    } catch {
      return [];
    }
  }
  return urls;
}

const Env = z.object({
  TABLE_NAME: withDefault(text(), 'ratchet-operations'),
  DYNAMODB_ENDPOINT: optional(httpUrl()),
  WEBHOOK_SIGNING_SECRETS: optional(z.string()),
  /** In AWS: a Secrets Manager secret holding WEBHOOK_SIGNING_SECRETS, so the value stays out of the function's configuration. */
  WEBHOOK_SIGNING_SECRETS_ARN: optional(z.string()),
  GEMINI_API_KEY: optional(z.string()),
  /** Several Gemini API keys by label (`label=key,label=key`): each job is polled with its own (its `credential`). */
  GEMINI_API_KEYS: optional(z.string().check(z.refine((value) => geminiKeysOf(value) !== undefined))),
  GEMINI_BASE_URL: optional(httpUrl()),
  /** In AWS: a Secrets Manager secret holding GEMINI_API_KEY. */
  GEMINI_API_KEY_ARN: optional(z.string()),
  /** OpenAI (providers/openai): a key, or several by label (`label=key,…`, a job's `credential`); the API's URL. */
  OPENAI_API_KEY: optional(z.string()),
  OPENAI_API_KEYS: optional(z.string().check(z.refine((value) => geminiKeysOf(value) !== undefined))),
  OPENAI_BASE_URL: optional(httpUrl()),
  /** OpenAI's webhook signing secrets (`whsec_…`, space- or comma-separated while rotating): POST /webhooks/openai. */
  OPENAI_WEBHOOK_SECRET: optional(z.string()),
  /** Anthropic (providers/anthropic): a key, or several by label; the API's URL. */
  ANTHROPIC_API_KEY: optional(z.string()),
  ANTHROPIC_API_KEYS: optional(z.string().check(z.refine((value) => geminiKeysOf(value) !== undefined))),
  ANTHROPIC_BASE_URL: optional(httpUrl()),
  /** Azure OpenAI: the resource's endpoint (`https://{resource}.openai.azure.com`), its key, its webhook's secrets. */
  AZURE_OPENAI_ENDPOINT: optional(httpUrl()),
  AZURE_OPENAI_API_KEY: optional(z.string()),
  AZURE_OPENAI_WEBHOOK_SECRET: optional(z.string()),
  /** Bedrock (providers/bedrock) is polled with the AWS default credential chain in the job's region; this endpoint where set. */
  AWS_ENDPOINT_URL_BEDROCK: optional(httpUrl()),
  /** The AWS region (set in Lambda): with it, Bedrock's jobs are polled. */
  AWS_REGION: optional(text()),
  /** The Gemini API version reconcile polls (set explicitly: SDK 3.x defaults to v1, 2.x to v1beta). */
  GEMINI_API_VERSION: withDefault(z.string().check(z.regex(/^v\d+\w*$/, 'expected an API version such as v1beta')), 'v1beta'),
  /** The Agent Platform (formerly Vertex AI) project and location whose jobs reconcile polls; both or neither. */
  GOOGLE_CLOUD_PROJECT: optional(text()),
  GOOGLE_CLOUD_LOCATION: optional(text()),
  /** Agent Platform: an express-mode API key; unset: Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, the metadata server). */
  AGENT_PLATFORM_API_KEY: optional(z.string()),
  AGENT_PLATFORM_API_KEY_ARN: optional(z.string()),
  /**
   * Agent Platform: a credentials JSON (a service account key, an external account configuration) given as a value,
   * or in AWS a Secrets Manager secret holding it; unset: Application Default Credentials.
   */
  AGENT_PLATFORM_CREDENTIALS: optional(z.string()),
  AGENT_PLATFORM_CREDENTIALS_ARN: optional(z.string()),
  /** Agent Platform: base URL override (tests), and the API version polled. */
  AGENT_PLATFORM_BASE_URL: optional(httpUrl()),
  AGENT_PLATFORM_API_VERSION: withDefault(z.string().check(z.regex(/^v\d+\w*$/, 'expected an API version such as v1beta1')), 'v1beta1'),
  /** The largest poll answer read, in MiB (an interaction that returns its video inline can be tens of MiB). */
  GEMINI_MAX_ANSWER_MB: withDefault(number(z.positive(), z.maximum(1024)), 64),
  /** The JSON Web Key Set dynamic-webhook signatures (`v1a` Ed25519, RS256 JWTs) are checked against. */
  GEMINI_WEBHOOK_KEYS_URL: withDefault(httpUrl(), GOOGLE_WEBHOOK_KEYS_URL),
  /** After a failed fetch of those keys (or a signature no key matched), how long before they are fetched again. */
  GEMINI_WEBHOOK_KEYS_RETRY_SECONDS: withDefault(number(z.positive()), 30),
  /** Expected `aud` of dynamic-webhook JWTs; unset: JWT-signed deliveries are refused (401). */
  GEMINI_WEBHOOK_AUDIENCE: optional(text()),
  /** Expected `iss` of dynamic-webhook JWTs. */
  GEMINI_WEBHOOK_ISSUER: withDefault(text(), GOOGLE_WEBHOOK_ISSUER),
  /** In AWS: the reconcile function, invoked at once when a JWT-signed delivery asks for a poll. */
  RECONCILE_FUNCTION_NAME: optional(text()),
  /** This deployment's webhook URL: reconcile's hourly health check looks at the Gemini webhooks pointing here (unset: all of the key's webhooks). */
  WEBHOOK_URL: optional(httpUrl()),
  RECONCILE_INTERVAL_SECONDS: withDefault(number(z.positive()), 60),
  /** In AWS: the queue reconcile's dispatcher hands the due jobs to, and its poll workers read. */
  POLL_QUEUE_URL: optional(text()),
  /** In AWS: the due jobs the poll queue may hold at most (what the workers take in about an interval); the dispatcher sends no more. */
  POLL_QUEUE_ROOM: withDefault(number(integer, z.positive()), 50_000),
  /** How long each kind of job may stay open before it is overdue (`batch=26h,interaction=2h,video=30m`): over the defaults. */
  OVERDUE_AFTER: optional(z.string().check(z.refine((value) => overdueLimitsOf(value) !== undefined))),
  EFFECTS_WEBHOOK_URL: optional(httpUrl()),
  /** In AWS: a Secrets Manager secret holding EFFECTS_WEBHOOK_URL (set by `npm run connect`, so a redeploy keeps it). */
  EFFECTS_WEBHOOK_URL_ARN: optional(z.string()),
  EFFECTS_SIGNING_SECRET: optional(z.string()),
  /** In AWS: a Secrets Manager secret holding EFFECTS_SIGNING_SECRET. */
  EFFECTS_SIGNING_SECRET_ARN: optional(z.string()),
  /** The effects ledger table; locally `<TABLE_NAME>-effects-ledger`. */
  EFFECTS_LEDGER_TABLE: optional(text()),
  /** Whole dead letters of the effects path; locally `<TABLE_NAME>-effects-dead-letters`. */
  EFFECTS_DEAD_LETTER_TABLE: optional(text()),
  /** In AWS: the event bus that receives `Operation State Changed` events. */
  EVENT_BUS_NAME: optional(text()),
  /** Outbound webhook: how long to wait for an answer. */
  EFFECTS_WEBHOOK_TIMEOUT_MS: withDefault(number(integer, z.positive()), 5_000),
  /** Local runtime: at most this many connections open to the outbound webhook's receiver at once. */
  EFFECTS_WEBHOOK_CONNECTIONS: withDefault(number(integer, z.minimum(1), z.maximum(256)), 8),
  /** Effects: first retry delay after a failed attempt, doubled per attempt. */
  EFFECTS_RETRY_BASE_MS: withDefault(number(integer, z.positive()), 1_000),
  /** Effects: the longest delay between attempts. */
  EFFECTS_RETRY_MAX_MS: withDefault(number(integer, z.positive()), 900_000),
  /** Effects: how long after its first attempt a transition is retried before it is dead-lettered (at most 13 days: SQS keeps 14). */
  EFFECTS_RETRY_FOR_SECONDS: withDefault(number(z.positive(), z.maximum(13 * 86_400)), 86_400),
  /**
   * PostgreSQL: how long an instance's claim on an effect holds: one killed in
   * the middle of a delivery leaves it to another instance after this. Above
   * the longest delivery (EFFECTS_WEBHOOK_TIMEOUT_MS, or an onChange handler).
   */
  EFFECTS_LEASE_SECONDS: withDefault(number(z.positive(), z.maximum(3_600)), 5),
  /** In AWS: the effects FIFO queue (the handler sets its messages' visibility as the backoff). */
  EFFECTS_QUEUE_URL: optional(text()),
  /** In AWS: the index reconcile reads due jobs from, where it is not `open-by-due-v2` (a stack upgrading: `open-by-due`). */
  OPEN_INDEX_NAME: optional(text()),
  /** Every applied write of every operation, from the stream; locally `<TABLE_NAME>-history`. */
  HISTORY_TABLE: optional(text()),
  /** How long history entries are kept (DynamoDB TTL). */
  HISTORY_RETENTION_DAYS: withDefault(number(z.positive()), 90),
  /** Local runtime: how long the outbox keeps each change: how far back the change feed reaches, and what an effects sink turned on later delivers first. */
  CHANGES_RETENTION_HOURS: withDefault(number(z.positive()), 24),
  /** Local runtime: the API tokens (space- or comma-separated, for rotation); unset: the data folder's token file. */
  RATCHET_API_TOKEN: optional(z.string()),
  /** Local runtime: the URL(s) Ratchet is reached at from outside (a TLS proxy in front); their hosts and origins are allowed. */
  PUBLIC_URL: optional(z.string().check(z.refine((value) => publicUrls(value).length > 0, 'expected one or more http(s) URLs'))),
  /** How many tracks (POST /operations, local runtime) one credential may make a minute; and how many polls JWT-only deliveries may ask (both engines). */
  TRACK_RATE_PER_MINUTE: withDefault(number(integer, z.positive()), 600),
  /** Local runtime: an operation tracked but never observed stops being polled after this many days, and is deleted as long again later. */
  TRACKED_EXPIRY_DAYS: withDefault(number(z.positive()), 7),
  /** The webhook signature schemes accepted: hmac (v1), v1a (Ed25519), jwt (RS256, needs GEMINI_WEBHOOK_AUDIENCE). */
  GEMINI_WEBHOOK_SCHEMES: withDefault(
    z.string().check(z.refine((value) => webhookSchemes(value) !== undefined, `expected one or more of ${WEBHOOK_SCHEMES.join(', ')}`)),
    WEBHOOK_SCHEMES.join(','),
  ),
  /** Local runtime: requests in flight at once; past it they are answered 503 with Retry-After at once. */
  HTTP_MAX_IN_FLIGHT: withDefault(number(integer, z.positive()), 256),
  /** Local runtime: a client must have sent its headers within this long, and its whole request within the next (else 408, closed). */
  HTTP_HEADERS_TIMEOUT_MS: withDefault(number(integer, z.positive()), 10_000),
  HTTP_REQUEST_TIMEOUT_MS: withDefault(number(integer, z.positive()), 30_000),
  /** Local runtime: long polls (`/changes`, `/operations/{name}?wait=`) and change streams held at once; past it 503 with Retry-After. */
  FEED_MAX_WAITING: withDefault(number(integer, z.positive()), 10_000),
  /** Local runtime: a comment line on every change stream this often, so proxies and clients see it alive. */
  FEED_KEEP_ALIVE_SECONDS: withDefault(number(z.positive()), 15),
  /** Local runtime: a change stream whose reader takes nothing for this long is sent a last `dropped` event and closed. */
  FEED_STALL_SECONDS: withDefault(number(z.positive()), 30),
  PORT: withDefault(number(integer, z.minimum(0), z.maximum(65535)), 3000),
  HOST: withDefault(text(), '127.0.0.1'),
  DATA_DIR: optional(text()),
  /** Ratchet on PostgreSQL (`postgres://user:password@host:port/database`): the engine instead of the data folder's SQLite file. */
  DATABASE_URL: optional(z.url({ protocol: /^postgres(ql)?$/ })),
  /** The schema that holds every table of Ratchet's in that database. */
  DATABASE_SCHEMA: withDefault(z.string().check(z.regex(/^(?!pg_)[a-z_][a-z0-9_]{0,62}$/)), 'ratchet'),
  /** A direct URL (not through a transaction pooler) for LISTEN, when DATABASE_URL is a pooler's. */
  DATABASE_LISTEN_URL: optional(z.url({ protocol: /^postgres(ql)?$/ })),
  /** `off`: never change the schema at start (a role that may not; run ratchet migrate with one that may). */
  DATABASE_MIGRATE: withDefault(z.enum(['on', 'off']), 'on'),
  /** Connections this instance opens to the database at most. */
  DATABASE_POOL_MAX: withDefault(number(integer, z.minimum(1), z.maximum(1000)), 10),
  /** DATABASE_POOL_MAX's former name, still read. */
  DATABASE_POOL_SIZE: optional(number(integer, z.minimum(1), z.maximum(1000))),
  /**
   * How long a statement may go unanswered before it fails and its connection is dropped: how soon a silent network
   * (packets dropped, nothing closed) is noticed. A transaction's server gives up on it alike.
   */
  DATABASE_STATEMENT_TIMEOUT_MS: withDefault(number(integer, z.minimum(100), z.maximum(3_600_000)), 5_000),
  /** How long a new connection, or a free one of the pool, may take. */
  DATABASE_CONNECT_TIMEOUT_MS: withDefault(number(integer, z.minimum(100), z.maximum(600_000)), 5_000),
});

export type Config = z.infer<typeof Env>;
export type Variable = keyof Config;

/** What each setting accepts, in words, for the one line a bad value gets. Variables not here are free text. */
const EXPECTS: Partial<Record<Variable, string>> = {
  TABLE_NAME: 'a table name',
  DYNAMODB_ENDPOINT: 'an http(s) URL',
  GEMINI_API_KEYS:
    'label=key pairs separated by commas (a label: letters, digits, ".", "-" or "_", at most 64, each once), e.g. team-a=AIza…,team-b=AIza…',
  GEMINI_BASE_URL: 'an http(s) URL',
  OPENAI_API_KEYS:
    'label=key pairs separated by commas (a label: letters, digits, ".", "-" or "_", at most 64, each once), e.g. team-a=sk-…,team-b=sk-…',
  ANTHROPIC_API_KEYS:
    'label=key pairs separated by commas (a label: letters, digits, ".", "-" or "_", at most 64, each once), e.g. team-a=sk-ant-…,team-b=sk-ant-…',
  OPENAI_BASE_URL: 'an http(s) URL',
  ANTHROPIC_BASE_URL: 'an http(s) URL',
  AZURE_OPENAI_ENDPOINT: 'an http(s) URL (https://{resource}.openai.azure.com)',
  AWS_ENDPOINT_URL_BEDROCK: 'an http(s) URL',
  GEMINI_API_VERSION: 'an API version such as v1beta',
  AGENT_PLATFORM_BASE_URL: 'an http(s) URL',
  AGENT_PLATFORM_API_VERSION: 'an API version such as v1beta1',
  GEMINI_MAX_ANSWER_MB: 'a number of MiB above 0, at most 1024',
  GEMINI_WEBHOOK_KEYS_URL: 'an http(s) URL',
  GEMINI_WEBHOOK_KEYS_RETRY_SECONDS: 'a number of seconds above 0',
  WEBHOOK_URL: 'an http(s) URL',
  RECONCILE_INTERVAL_SECONDS: 'a number of seconds above 0',
  POLL_QUEUE_ROOM: 'a whole number of jobs above 0',
  OVERDUE_AFTER: `kind=duration pairs separated by commas (units s, m, h, d, or off; kinds ${OVERDUE_NAMES.join(', ')}), e.g. batch=26h,interaction=2h,video=30m`,
  EFFECTS_WEBHOOK_URL: 'an http(s) URL',
  EFFECTS_WEBHOOK_TIMEOUT_MS: 'a whole number of milliseconds above 0',
  EFFECTS_WEBHOOK_CONNECTIONS: 'a whole number from 1 to 256',
  EFFECTS_RETRY_BASE_MS: 'a whole number of milliseconds above 0',
  EFFECTS_RETRY_MAX_MS: 'a whole number of milliseconds above 0',
  EFFECTS_RETRY_FOR_SECONDS: 'a number of seconds above 0, at most 1123200 (13 days)',
  EFFECTS_LEASE_SECONDS: 'a number of seconds above 0, at most 3600',
  HISTORY_RETENTION_DAYS: 'a number of days above 0',
  CHANGES_RETENTION_HOURS: 'a number of hours above 0',
  PUBLIC_URL: 'one or more http(s) URLs, separated by spaces or commas',
  TRACK_RATE_PER_MINUTE: 'a whole number above 0',
  TRACKED_EXPIRY_DAYS: 'a number of days above 0',
  GEMINI_WEBHOOK_SCHEMES: 'one or more of hmac, v1a, jwt',
  HTTP_MAX_IN_FLIGHT: 'a whole number above 0',
  HTTP_HEADERS_TIMEOUT_MS: 'a whole number of milliseconds above 0',
  HTTP_REQUEST_TIMEOUT_MS: 'a whole number of milliseconds above 0',
  FEED_MAX_WAITING: 'a whole number above 0',
  FEED_KEEP_ALIVE_SECONDS: 'a number of seconds above 0',
  FEED_STALL_SECONDS: 'a number of seconds above 0',
  PORT: 'a whole number from 0 to 65535 (0: any free port)',
  HOST: 'a host name or address',
  DATA_DIR: 'a folder',
  DATABASE_URL: 'a postgres:// URL (postgres://user:password@host:port/database)',
  DATABASE_SCHEMA: 'a lower-case identifier (letters, digits, _) not starting with pg_',
  DATABASE_LISTEN_URL: 'a postgres:// URL',
  DATABASE_MIGRATE: 'on or off',
  DATABASE_POOL_MAX: 'a whole number from 1 to 1000',
  DATABASE_POOL_SIZE: 'a whole number from 1 to 1000 (DATABASE_POOL_MAX is its name now)',
  DATABASE_STATEMENT_TIMEOUT_MS: 'a whole number of milliseconds from 100 to 3600000',
  DATABASE_CONNECT_TIMEOUT_MS: 'a whole number of milliseconds from 100 to 600000',
};

/** Settings whose values are secrets (or hold one): a message names them, never shows the value. */
export const SECRET_VARIABLES: ReadonlySet<string> = new Set([
  'WEBHOOK_SIGNING_SECRETS',
  'EFFECTS_SIGNING_SECRET',
  'GEMINI_API_KEY',
  'GEMINI_API_KEYS',
  'OPENAI_API_KEY',
  'OPENAI_API_KEYS',
  'OPENAI_WEBHOOK_SECRET',
  'ANTHROPIC_API_KEY',
  'ANTHROPIC_API_KEYS',
  'AZURE_OPENAI_API_KEY',
  'AZURE_OPENAI_WEBHOOK_SECRET',
  'RATCHET_API_TOKEN',
  'AGENT_PLATFORM_API_KEY',
  'AGENT_PLATFORM_CREDENTIALS',
  // A URL may carry credentials (a token in its query, a user:password@).
  'EFFECTS_WEBHOOK_URL',
  // A database URL carries its password.
  'DATABASE_URL',
  'DATABASE_LISTEN_URL',
]);

/** `NAME must be …, not "value"` (the value left out for a secret): the one line a bad setting gets. */
export function badSetting(variable: string, expects: string, value: unknown): ConfigError {
  const shown = SECRET_VARIABLES.has(variable) || value === undefined ? '' : `, not ${JSON.stringify(String(value).slice(0, 80))}`;
  return new ConfigError(`${variable} must be ${expects}${shown}`, variable);
}

/** Each kind's overdue limit in seconds: OVERDUE_AFTER over the defaults (core/overdue.ts). */
export function overdueAfterOf(config: Config): OverdueLimits {
  return (config.OVERDUE_AFTER && overdueLimitsOf(config.OVERDUE_AFTER)) || DEFAULT_OVERDUE_AFTER;
}

/** The Agent Platform project and location, when both are set (reconcile polls `projects/{p}/locations/{l}/…` there). */
export function agentPlatformOf(config: Config): { project: string; location: string } | undefined {
  return config.GOOGLE_CLOUD_PROJECT && config.GOOGLE_CLOUD_LOCATION
    ? { project: config.GOOGLE_CLOUD_PROJECT, location: config.GOOGLE_CLOUD_LOCATION }
    : undefined;
}

/** The Azure OpenAI resource an endpoint serves (`https://{resource}.openai.azure.com` → `{resource}`): its jobs' names hold it. */
export function azureResourceOf(endpoint: string): string {
  return new URL(endpoint).hostname.split('.')[0] as string;
}

/** A setting that cannot be used; `variable` names it. Its message is one line, never the value of a secret. */
export class ConfigError extends Error {
  override name = 'ConfigError';
  constructor(
    message: string,
    readonly variable?: string,
  ) {
    super(message);
  }
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "unset", as in most shells' habits.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = Env.safeParse(present);
  if (parsed.success) {
    for (const provider of ['GEMINI', 'OPENAI', 'ANTHROPIC']) {
      if (present[`${provider}_API_KEYS`] && present[`${provider}_API_KEY`]) {
        throw new ConfigError(
          `${provider}_API_KEYS and ${provider}_API_KEY are both set: keep one (${provider}_API_KEYS=label=key,label=key holds one key or several)`,
          `${provider}_API_KEYS`,
        );
      }
    }
    if (parsed.data.DATABASE_POOL_SIZE !== undefined) {
      if (present.DATABASE_POOL_MAX && parsed.data.DATABASE_POOL_MAX !== parsed.data.DATABASE_POOL_SIZE)
        throw new ConfigError(
          'DATABASE_POOL_MAX and DATABASE_POOL_SIZE (its former name) disagree: keep DATABASE_POOL_MAX',
          'DATABASE_POOL_MAX',
        );
      return { ...parsed.data, DATABASE_POOL_MAX: parsed.data.DATABASE_POOL_SIZE };
    }
    return parsed.data;
  }
  // The first bad setting, in one line that names it and what it accepts.
  const issue = parsed.error.issues[0] as z.core.$ZodIssue;
  const variable = String(issue.path[0]);
  throw badSetting(variable, EXPECTS[variable as Variable] ?? issue.message, present[variable]);
}
