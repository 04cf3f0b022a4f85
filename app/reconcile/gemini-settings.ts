/**
 * Gemini's poller options from the configuration (providers/gemini/poller.ts
 * polls with them): the Gemini API's keys, the Agent Platform's project,
 * location and credentials, each secret read however the home reads it.
 */
import { geminiKeysOf } from '../../core/credentials.ts';
import { neverLogged } from '../../core/redaction.ts';
import type { PollerOptions } from '../../providers/gemini/poller.ts';
import { agentPlatformOf, type Config, ConfigError } from '../config.ts';

/** The secret settings the poller needs, however the caller reads them (the variable itself, or Secrets Manager in AWS). */
export type PollerSecret = 'GEMINI_API_KEY' | 'AGENT_PLATFORM_API_KEY' | 'AGENT_PLATFORM_CREDENTIALS';

/**
 * What reconcile polls with, from the configuration: the Gemini API when it has a
 * key, the Agent Platform when a project and location are set. Undefined when
 * neither is: nothing can be polled. A credentials JSON that does not parse is a
 * ConfigError naming the variable (never its value).
 */
export async function pollerOptionsOf(
  config: Config,
  secret: (name: PollerSecret) => Promise<string | undefined>,
): Promise<PollerOptions | undefined> {
  // Several keys by label (GEMINI_API_KEYS; in AWS the Gemini key's secret may hold the same label=key pairs), or one.
  const single = await secret('GEMINI_API_KEY');
  const pairs = config.GEMINI_API_KEYS ?? (single?.includes('=') ? single : undefined);
  const keys = pairs === undefined ? undefined : geminiKeysOf(pairs);
  if (pairs !== undefined && !keys)
    throw new ConfigError('the Gemini API keys are not label=key pairs (GEMINI_API_KEYS)', 'GEMINI_API_KEYS');
  const apiKey = keys?.[0]?.apiKey ?? single;
  // Gemini's error bodies are logged: a key they quote must not be (app/logger.ts).
  neverLogged([single, ...(keys ?? []).map((key) => key.apiKey)]);
  const scope = agentPlatformOf(config);
  const options: PollerOptions = {
    maxAnswerBytes: config.GEMINI_MAX_ANSWER_MB * 1_048_576,
    ...(apiKey && {
      gemini: { apiKey, ...(keys && { keys }), baseUrl: config.GEMINI_BASE_URL, apiVersion: config.GEMINI_API_VERSION },
    }),
  };
  if (scope) {
    const platformKey = await secret('AGENT_PLATFORM_API_KEY');
    neverLogged([platformKey]);
    const credentials = await secret('AGENT_PLATFORM_CREDENTIALS');
    options.platform = {
      ...scope,
      ...(platformKey && { apiKey: platformKey }),
      ...(credentials && { credentials: credentialsOf(credentials) }),
      baseUrl: config.AGENT_PLATFORM_BASE_URL,
      apiVersion: config.AGENT_PLATFORM_API_VERSION,
    };
  }
  return options.gemini || options.platform ? options : undefined;
}

function credentialsOf(json: string): Record<string, unknown> {
  try {
    const parsed = JSON.parse(json) as unknown;
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {}
  throw new ConfigError(
    'AGENT_PLATFORM_CREDENTIALS is not a credentials JSON object (a service account key or an external account configuration)',
  );
}
