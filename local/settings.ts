/**
 * Every setting a front end (`ratchet start`, `createRatchet`) runs with,
 * resolved from the configuration once, here: the engine's work, reconcile,
 * the data folder, and (once the folder is the front end's to write) the API
 * tokens and the webhook signing secrets. Everything is checked before
 * anything is opened, written or spawned (start-config.ts); the rest of the
 * front end reads these, never the Config again.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { agentPlatformOf, type Config, overdueAfterOf } from '../app/config.ts';
import { retrySettings } from '../app/effects/queue.ts';
import { webhookSinkSettingsOf } from '../app/effects/webhook-sink.ts';
import type { EngineWork } from '../app/engine.ts';
import { parseSigningSecrets } from '../app/http/webhook-signature.ts';
import type { InstanceSettings } from '../app/instance.ts';
import { geminiKeysOf } from '../core/credentials.ts';
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
  // Reconcile polls with a Gemini API key, or in an Agent Platform project and location; the SDK loads only then.
  const polls = Boolean(config.GEMINI_API_KEY || config.GEMINI_API_KEYS || agentPlatformOf(config));
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
      ...(polls && {
        reconcile: {
          intervalSeconds: config.RECONCILE_INTERVAL_SECONDS,
          unseenExpiryMs: config.TRACKED_EXPIRY_DAYS * 86_400_000,
          overdueAfter: overdueAfterOf(config),
          webhookUrl: config.WEBHOOK_URL,
          poller: async () => (await import('../app/reconcile/gemini-poller.ts')).pollerOptionsOf(config, async (name) => config[name]),
        },
      }),
    },
  };
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
  return {
    tokens,
    signingSecrets: parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS ?? (devSecret as string)),
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
