/**
 * The settings a front end (`ratchet start`, `createRatchet`) resolves from
 * the configuration, once, here: the engine's work, reconcile, the data
 * folder, and (once the folder is the front end's to write) the API tokens
 * and the webhook signing secrets. Everything is checked before anything is
 * opened, written or spawned (start-config.ts). The plain values the HTTP
 * face and the server take as they are (PUBLIC_URL, the feed's and the
 * server's limits, HOST, PORT) are still read off `config` where they are
 * used (open.ts, runtime.ts).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentPlatformOf, type Config, ConfigError, loadConfig, overdueAfterOf } from '../app/config.ts';
import type { OnChange } from '../app/effects/app-sink.ts';
import { retrySettings } from '../app/effects/queue.ts';
import { webhookSinkSettingsOf } from '../app/effects/webhook-sink.ts';
import type { EngineWork } from '../app/engine.ts';
import type { InstanceSettings } from '../app/instance.ts';
import { providerPollerSettingsOf } from '../app/reconcile/providers.ts';
import { parseSigningSecrets } from '../app/signing-secrets.ts';
import { openTelemetrySettings, otlpRequested } from '../app/telemetry.ts';
import { geminiKeysOf } from '../core/credentials.ts';
import type { PoolLike } from '../engines/postgres/index.ts';
import { DEFAULT_DATA_DIR, DEV_SECRET_FILE, IN_MEMORY } from '../engines/sqlite/index.ts';
import { type ApiTokens, resolveApiTokens } from './access/api-token.ts';
import { checkStartConfig } from './start-config.ts';

export interface Settings {
  config: Config;
  /** SQLite's data folder (`:memory:` on PostgreSQL, where the data is the database's). */
  dataDir: string;
  /** What runs beside the store: retention, and the effects path where a sink (or `onChange`) takes them. */
  work: EngineWork;
  instance: InstanceSettings;
}

export interface Secrets {
  tokens: ApiTokens;
  /** The signing secrets webhooks are checked against (WEBHOOK_SIGNING_SECRETS, else the development secret). */
  signingSecrets: ReturnType<typeof parseSigningSecrets>;
  /** OpenAI's and Azure OpenAI's webhook secrets (OPENAI_WEBHOOK_SECRET, AZURE_OPENAI_WEBHOOK_SECRET); none: not set. */
  providerSecrets: { openai: string[]; 'azure-openai': string[] };
  /** Set when no WEBHOOK_SIGNING_SECRETS was configured: the generated development secret (never printed). */
  devSecret?: string;
  /** Where the development secret is kept (not with `:memory:`). */
  devSecretFile?: string;
}

/** Every setting checked and resolved; `onChange`: the application takes effects itself (the library). */
export function settingsOf(config: Config, options: { onChange?: boolean; dataDir?: string } = {}): Settings {
  checkStartConfig(config);
  const sink = webhookSinkSettingsOf(config);
  const onChange = options.onChange === true;
  const labels = (config.GEMINI_API_KEYS && geminiKeysOf(config.GEMINI_API_KEYS)?.map((key) => key.label)) || [];
  // Every other provider with a credential here (providers/): its SDK loads only then.
  const providers = providerPollerSettingsOf(config);
  const labelsOf = (keys: Array<{ label: string }> | undefined) => keys?.map((key) => key.label).filter(Boolean) ?? [];
  // Reconcile polls with a Gemini API key, or in an Agent Platform project and location, or another provider's key.
  const polls = Boolean(config.GEMINI_API_KEY || config.GEMINI_API_KEYS || agentPlatformOf(config) || Object.keys(providers).length > 0);
  return {
    config,
    dataDir: options.dataDir ?? config.DATA_DIR ?? DEFAULT_DATA_DIR,
    work: {
      historyRetentionDays: config.HISTORY_RETENTION_DAYS,
      changesRetentionMs: config.CHANGES_RETENTION_HOURS * 3_600_000,
      ...((sink || onChange) && { effects: { ...(sink && { sink }), retry: retrySettings(config) } }),
    },
    instance: {
      credentialLabels: labels,
      providerLabels: { gemini: labels, openai: labelsOf(providers.openai?.keys), anthropic: labelsOf(providers.anthropic?.keys) },
      ...(polls && {
        reconcile: {
          intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
          unseenExpiryMs: config.TRACKED_EXPIRY_DAYS * 86_400_000,
          overdueAfter: overdueAfterOf(config),
          webhookUrl: config.WEBHOOK_URL,
          poller: async () => (await import('../app/reconcile/gemini-settings.ts')).pollerOptionsOf(config, async (name) => config[name]),
          providers,
        },
      }),
    },
  };
}

export interface RatchetOptions {
  /** PostgreSQL by URL (`DATABASE_URL`): `postgres://user:password@host:5432/db`. */
  databaseUrl?: string;
  /** PostgreSQL on the application's own `pg` pool (Ratchet does not end it). */
  pool?: PoolLike;
  /** The schema Ratchet's tables live in (`DATABASE_SCHEMA`, default `ratchet`). */
  schema?: string;
  /** SQLite in a data folder (`DATA_DIR`, default `./.ratchet-data`) where there is no database; `':memory:'` for tests. */
  dataDir?: string;
  /** Gemini's webhook signing secrets, comma-separated (`WEBHOOK_SIGNING_SECRETS`). */
  webhookSigningSecrets?: string;
  /** The API's bearer tokens, comma-separated (`RATCHET_API_TOKEN`); without one, a token kept in this process only. */
  apiToken?: string;
  /** What reconcile polls with (`GEMINI_API_KEY`); the Agent Platform's are read from `env`. */
  geminiApiKey?: string;
  /** Several Gemini API keys by label (`GEMINI_API_KEYS`: `team-a=AIza…,team-b=AIza…`), instead of `geminiApiKey`. */
  geminiApiKeys?: string;
  /** OpenAI: what reconcile polls with (`OPENAI_API_KEY`), or several keys by label (`OPENAI_API_KEYS`), and where (`OPENAI_BASE_URL`). */
  openaiApiKey?: string;
  openaiApiKeys?: string;
  openaiBaseUrl?: string;
  /** OpenAI's webhook signing secrets (`OPENAI_WEBHOOK_SECRET`, `whsec_…`): `POST /webhooks/openai`. */
  openaiWebhookSecret?: string;
  /** Anthropic: what reconcile polls with (`ANTHROPIC_API_KEY`, or `ANTHROPIC_API_KEYS` by label), and where (`ANTHROPIC_BASE_URL`). */
  anthropicApiKey?: string;
  anthropicApiKeys?: string;
  anthropicBaseUrl?: string;
  /** Azure OpenAI: the resource's endpoint, its key, its webhook's secrets (`AZURE_OPENAI_ENDPOINT`, `AZURE_OPENAI_API_KEY`, `AZURE_OPENAI_WEBHOOK_SECRET`). */
  azureOpenaiEndpoint?: string;
  azureOpenaiApiKey?: string;
  azureOpenaiWebhookSecret?: string;
  /** How long each kind of job may stay open before it is overdue (`OVERDUE_AFTER`: `batch=26h,interaction=2h`). */
  overdueAfter?: string;
  /** The signed outbound webhook (`EFFECTS_WEBHOOK_URL`, `EFFECTS_SIGNING_SECRET`), beside or instead of `onChange`. */
  effectsWebhookUrl?: string;
  effectsSigningSecret?: string;
  /** Where browsers reach the application (`PUBLIC_URL`): the console and API answer to its host only (and loopback). */
  publicUrl?: string;
  /** Where `fetch` is mounted: `/api/ratchet` serves `/api/ratchet/webhooks/gemini`, `/api/ratchet/operations`… */
  basePath?: string;
  /** The application's function for each applied state change, each outcome learnt after its job ended (`type: operation.result`) and each job found overdue (`type: operation.overdue`). */
  onChange?: OnChange;
  /** Every other documented variable (docs/contract.md), and these when not given above; default `process.env`. */
  env?: Record<string, string | undefined>;
}

const OPTION_VARIABLES = {
  databaseUrl: 'DATABASE_URL',
  schema: 'DATABASE_SCHEMA',
  dataDir: 'DATA_DIR',
  webhookSigningSecrets: 'WEBHOOK_SIGNING_SECRETS',
  apiToken: 'RATCHET_API_TOKEN',
  geminiApiKey: 'GEMINI_API_KEY',
  geminiApiKeys: 'GEMINI_API_KEYS',
  openaiApiKey: 'OPENAI_API_KEY',
  openaiApiKeys: 'OPENAI_API_KEYS',
  openaiBaseUrl: 'OPENAI_BASE_URL',
  openaiWebhookSecret: 'OPENAI_WEBHOOK_SECRET',
  anthropicApiKey: 'ANTHROPIC_API_KEY',
  anthropicApiKeys: 'ANTHROPIC_API_KEYS',
  anthropicBaseUrl: 'ANTHROPIC_BASE_URL',
  azureOpenaiEndpoint: 'AZURE_OPENAI_ENDPOINT',
  azureOpenaiApiKey: 'AZURE_OPENAI_API_KEY',
  azureOpenaiWebhookSecret: 'AZURE_OPENAI_WEBHOOK_SECRET',
  overdueAfter: 'OVERDUE_AFTER',
  effectsWebhookUrl: 'EFFECTS_WEBHOOK_URL',
  effectsSigningSecret: 'EFFECTS_SIGNING_SECRET',
  publicUrl: 'PUBLIC_URL',
} as const satisfies Partial<Record<keyof RatchetOptions, string>>;

/**
 * `createRatchet`'s settings: its options over its environment (each the
 * variable it stands for), checked as `ratchet start` checks them, with what
 * only an application is refused: a pool and a URL at once, and PostgreSQL
 * without a signing secret a sender could know.
 */
export function appSettingsOf(options: RatchetOptions) {
  const env: Record<string, string | undefined> = { ...(options.env ?? process.env) };
  for (const [option, variable] of Object.entries(OPTION_VARIABLES)) {
    const value = options[option as keyof typeof OPTION_VARIABLES];
    if (value !== undefined) env[variable] = value;
  }
  const config = loadConfig(env);
  if (options.pool && options.databaseUrl) throw new ConfigError('give pool or databaseUrl (DATABASE_URL), not both', 'DATABASE_URL');
  const onPostgres = Boolean(options.pool || config.DATABASE_URL);
  const settings = settingsOf(config, { onChange: Boolean(options.onChange), ...(onPostgres && { dataDir: IN_MEMORY }) });
  // OpenTelemetry reads the process's own environment (its SDK does): its settings are refused here, not on first use.
  if (otlpRequested()) openTelemetrySettings();
  const basePath = basePathOf(options.basePath);
  // On PostgreSQL a generated secret would refuse every webhook, in silence, for as long as the data lives. A data
  // folder keeps its development secret in a file, as ratchet start does (said once it opens).
  if (!config.WEBHOOK_SIGNING_SECRETS && onPostgres)
    throw new ConfigError(
      'webhookSigningSecrets (WEBHOOK_SIGNING_SECRETS) must be set on PostgreSQL, where the data outlives this process: ' +
        "Gemini's webhook signing secret, whsec_… (docs/apps.md: make one and send a signed test webhook)",
      'WEBHOOK_SIGNING_SECRETS',
    );
  return { settings, env, onPostgres, basePath };
}

/** `/api/ratchet/` → `/api/ratchet`; refused unless a path of plain segments. */
function basePathOf(value: string | undefined): string {
  if (value === undefined || value === '' || value === '/') return '';
  const trimmed = value.replace(/\/+$/, '');
  if (!/^(\/[A-Za-z0-9._~-]+)+$/.test(trimmed))
    throw new ConfigError(`basePath must be a path such as /api/ratchet, not ${JSON.stringify(value)}`, 'basePath');
  return trimmed;
}

/**
 * The API tokens and the signing secrets, from the configuration or the data
 * folder (made here, owner-only, when missing). `tokenFile` false (inside an
 * app): without RATCHET_API_TOKEN the token is kept in this process only and
 * nothing is written into a folder that is often the app's own.
 */
export function secretsOf({ config, dataDir }: Settings, options: { tokenFile: boolean }): Secrets {
  if (dataDir !== IN_MEMORY) mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const devSecret = config.WEBHOOK_SIGNING_SECRETS ? undefined : developmentSecret(dataDir);
  const tokens = resolveApiTokens(config.RATCHET_API_TOKEN, options.tokenFile ? dataDir : IN_MEMORY, config.HOST) as ApiTokens;
  const secretsIn = (variable: 'OPENAI_WEBHOOK_SECRET' | 'AZURE_OPENAI_WEBHOOK_SECRET') =>
    config[variable] ? parseSigningSecrets(config[variable], { variable }) : [];
  return {
    tokens,
    signingSecrets: parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS ?? (devSecret as string)),
    providerSecrets: { openai: secretsIn('OPENAI_WEBHOOK_SECRET'), 'azure-openai': secretsIn('AZURE_OPENAI_WEBHOOK_SECRET') },
    ...(devSecret && { devSecret }),
    ...(devSecret && dataDir !== IN_MEMORY && { devSecretFile: join(dataDir, DEV_SECRET_FILE) }),
  };
}

/**
 * The development secret, kept beside the data it signs for (`DATA_DIR`, owner
 * read-only), so the one exported a minute ago still works after a restart. A
 * new one each start with `:memory:`, or if the file does not hold one.
 */
function developmentSecret(dataDir: string): string {
  const fresh = `whsec_${randomBytes(24).toString('base64')}`;
  if (dataDir === IN_MEMORY) return fresh;
  const file = join(dataDir, DEV_SECRET_FILE);
  if (existsSync(file)) {
    const kept = readFileSync(file, 'utf8').trim();
    try {
      parseSigningSecrets(kept);
      return kept;
    } catch {
      // not a secret (edited by hand?): replaced below
    }
  }
  writeFileSync(file, `${fresh}\n`, { mode: 0o600 });
  return fresh;
}
