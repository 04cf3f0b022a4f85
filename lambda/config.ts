/**
 * The one config loader. Same variable names in Lambda and in the local
 * runtime (see README, "Configuration").
 */
import { z } from 'zod';

/** Where Google publishes the keys of dynamic-webhook signatures. */
export const GOOGLE_WEBHOOK_KEYS_URL = 'https://generativelanguage.googleapis.com/.well-known/jwks.json';
/** The issuer dynamic-webhook JWTs are expected to carry unless GEMINI_WEBHOOK_ISSUER says otherwise. */
export const GOOGLE_WEBHOOK_ISSUER = 'https://generativelanguage.googleapis.com';

const Env = z.object({
  TABLE_NAME: z.string().min(1).default('ratchet-operations'),
  DYNAMODB_ENDPOINT: z.url().optional(),
  WEBHOOK_SIGNING_SECRETS: z.string().optional(),
  /** In AWS: a Secrets Manager secret holding WEBHOOK_SIGNING_SECRETS, so the value stays out of the function's configuration. */
  WEBHOOK_SIGNING_SECRETS_ARN: z.string().optional(),
  GEMINI_API_KEY: z.string().optional(),
  GEMINI_BASE_URL: z.url().optional(),
  /** In AWS: a Secrets Manager secret holding GEMINI_API_KEY. */
  GEMINI_API_KEY_ARN: z.string().optional(),
  /** The JSON Web Key Set dynamic-webhook signatures (`v1a` Ed25519, RS256 JWTs) are checked against. */
  GEMINI_WEBHOOK_KEYS_URL: z.url().default(GOOGLE_WEBHOOK_KEYS_URL),
  /** Expected `aud` of dynamic-webhook JWTs; unset: JWT-signed deliveries are refused (401). */
  GEMINI_WEBHOOK_AUDIENCE: z.string().min(1).optional(),
  /** Expected `iss` of dynamic-webhook JWTs. */
  GEMINI_WEBHOOK_ISSUER: z.string().min(1).default(GOOGLE_WEBHOOK_ISSUER),
  /** In AWS: the reconcile function, invoked at once when a JWT-signed delivery asks for a poll. */
  RECONCILE_FUNCTION_NAME: z.string().min(1).optional(),
  /** This deployment's webhook URL: reconcile's hourly health check looks at the Gemini webhooks pointing here (unset: all of the key's webhooks). */
  WEBHOOK_URL: z.url().optional(),
  RECONCILE_INTERVAL_SECONDS: z.coerce.number().positive().default(60),
  EFFECTS_WEBHOOK_URL: z.url().optional(),
  /** In AWS: a Secrets Manager secret holding EFFECTS_WEBHOOK_URL (set by `npm run connect`, so a redeploy keeps it). */
  EFFECTS_WEBHOOK_URL_ARN: z.string().optional(),
  EFFECTS_SIGNING_SECRET: z.string().optional(),
  /** In AWS: a Secrets Manager secret holding EFFECTS_SIGNING_SECRET. */
  EFFECTS_SIGNING_SECRET_ARN: z.string().optional(),
  /** The effects ledger table; locally `<TABLE_NAME>-effects-ledger`. */
  EFFECTS_LEDGER_TABLE: z.string().min(1).optional(),
  /** Whole dead letters of the effects path; locally `<TABLE_NAME>-effects-dead-letters`. */
  EFFECTS_DEAD_LETTER_TABLE: z.string().min(1).optional(),
  /** In AWS: the event bus that receives `Operation State Changed` events. */
  EVENT_BUS_NAME: z.string().min(1).optional(),
  /** Outbound webhook: how long to wait for an answer. */
  EFFECTS_WEBHOOK_TIMEOUT_MS: z.coerce.number().int().positive().default(5_000),
  /** Effects: first retry delay after a failed attempt, doubled per attempt. */
  EFFECTS_RETRY_BASE_MS: z.coerce.number().int().positive().default(1_000),
  /** Effects: the longest delay between attempts. */
  EFFECTS_RETRY_MAX_MS: z.coerce.number().int().positive().default(3_600_000),
  /** Effects: how long after its first attempt a transition is retried before it is dead-lettered (at most 13 days: SQS keeps 14). */
  EFFECTS_RETRY_FOR_SECONDS: z.coerce
    .number()
    .positive()
    .max(13 * 86_400)
    .default(86_400),
  /** In AWS: the effects FIFO queue (the handler sets its messages' visibility as the backoff). */
  EFFECTS_QUEUE_URL: z.string().min(1).optional(),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATA_DIR: z.string().min(1).optional(),
});

export type Config = z.infer<typeof Env>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "unset", as in most shells' habits.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = Env.safeParse(present);
  if (!parsed.success) throw new ConfigError(`invalid configuration: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
