/**
 * Everything `ratchet start` (and the library, and the demo) checks of its
 * configuration before it opens, writes or spawns anything: what the type of
 * each variable cannot say (app/config.ts checks those), each secret under
 * its own name, settings that need each other, and the data folder. The first
 * problem is one line naming the variable and what it accepts (ConfigError;
 * the command exits 2), never a secret's value.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { type Config, ConfigError } from '../app/config.ts';
import { effectsSigningSecretOf } from '../app/effects/webhook-sink.ts';
import { InvalidSecretError, parseSigningSecrets } from '../app/signing-secrets.ts';
import { parseTokens, TokenConfigError } from './access/api-token.ts';

export function checkStartConfig(config: Config): void {
  if (config.WEBHOOK_SIGNING_SECRETS !== undefined) {
    try {
      parseSigningSecrets(config.WEBHOOK_SIGNING_SECRETS, { variable: 'WEBHOOK_SIGNING_SECRETS' });
    } catch (error) {
      if (error instanceof InvalidSecretError) throw new ConfigError(error.message, 'WEBHOOK_SIGNING_SECRETS');
      throw error;
    }
  }
  // Beside EFFECTS_WEBHOOK_URL the effects secret is resolved with the sink (webhookSinkSettingsOf, by the runtime); set alone, checked here.
  if (config.EFFECTS_SIGNING_SECRET !== undefined && !config.EFFECTS_WEBHOOK_URL) effectsSigningSecretOf(config.EFFECTS_SIGNING_SECRET);
  if (config.RATCHET_API_TOKEN !== undefined) {
    try {
      parseTokens(config.RATCHET_API_TOKEN, 'RATCHET_API_TOKEN');
    } catch (error) {
      if (error instanceof TokenConfigError) throw new ConfigError(error.message, 'RATCHET_API_TOKEN');
      throw error;
    }
  }
  if (Boolean(config.GOOGLE_CLOUD_PROJECT) !== Boolean(config.GOOGLE_CLOUD_LOCATION)) {
    const missing = config.GOOGLE_CLOUD_PROJECT ? 'GOOGLE_CLOUD_LOCATION' : 'GOOGLE_CLOUD_PROJECT';
    throw new ConfigError(
      `${missing} must be set too: the Agent Platform is polled in one project and one location (e.g. us-central1), or neither is set`,
      missing,
    );
  }
  if (config.AGENT_PLATFORM_CREDENTIALS !== undefined && !isJsonObject(config.AGENT_PLATFORM_CREDENTIALS))
    throw new ConfigError(
      'AGENT_PLATFORM_CREDENTIALS must be a credentials JSON object (a service account key or an external account configuration)',
      'AGENT_PLATFORM_CREDENTIALS',
    );
  const adc = process.env.GOOGLE_APPLICATION_CREDENTIALS;
  if (adc && config.GOOGLE_CLOUD_PROJECT && !isFile(adc))
    throw new ConfigError(
      `GOOGLE_APPLICATION_CREDENTIALS must name a credentials file, not ${JSON.stringify(adc)}`,
      'GOOGLE_APPLICATION_CREDENTIALS',
    );
  const dataDir = config.DATA_DIR;
  if (dataDir && dataDir !== ':memory:' && existsSync(dataDir) && !statSync(dataDir).isDirectory())
    throw new ConfigError(`DATA_DIR must be a folder (or not exist yet), not the file ${JSON.stringify(dataDir)}`, 'DATA_DIR');
}

function isJsonObject(text: string): boolean {
  try {
    const value = JSON.parse(text) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value);
  } catch {
    return false;
  }
}

function isFile(path: string): boolean {
  try {
    readFileSync(path);
    return true;
  } catch {
    return false;
  }
}
