/**
 * The one way a function reads a secret setting: the variable itself (local,
 * tests), else the Secrets Manager secret named by `<variable>_ARN` (AWS),
 * cached for 5 minutes so a rotation lands without a deploy. A secret that is
 * not configured yet is asked again every 10 s instead: the first delivery
 * after `npm run connect` must not wait out the cache. A caller that found the
 * value stale (a signature no cached secret matches) may ask past the cache,
 * at most every 30 s.
 */
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import type { Config } from '../app/config.ts';
import { configuredValue } from '../app/not-configured.ts';

/** The settings the shared Config names a `<variable>_ARN` for. */
type ConfigSecret =
  | 'WEBHOOK_SIGNING_SECRETS'
  | 'EFFECTS_SIGNING_SECRET'
  | 'EFFECTS_WEBHOOK_URL'
  | 'GEMINI_API_KEY'
  | 'AGENT_PLATFORM_API_KEY'
  | 'AGENT_PLATFORM_CREDENTIALS';
/**
 * The other providers' secrets (lib/ratchet.ts binds each one a prop names): an API key secret holds one key or
 * label=key pairs, as GEMINI_API_KEY's does. Their `_ARN` variables are the Lambda's alone, read here.
 */
const PROVIDER_SECRETS = [
  'OPENAI_API_KEY',
  'OPENAI_WEBHOOK_SECRET',
  'ANTHROPIC_API_KEY',
  'AZURE_OPENAI_API_KEY',
  'AZURE_OPENAI_WEBHOOK_SECRET',
] as const;
type ProviderSecret = (typeof PROVIDER_SECRETS)[number];
type SecretSetting = ConfigSecret | ProviderSecret;

const CACHE_SECONDS = 300;
const NOT_CONFIGURED_RECHECK_MS = 10_000;
const REFRESH_INTERVAL_MS = 30_000;
/** Per secret ARN: when a value found not configured may be fetched again, past the cache. */
const recheckAt = new Map<string, number>();
/** Per secret ARN: when it was last fetched past the cache. */
const fetchedAt = new Map<string, number>();

/** The setting's value, or undefined when it is not configured (unset, empty, or the stack's placeholder). */
export async function secretSetting(
  config: Config,
  variable: SecretSetting,
  options: { refresh?: boolean } = {},
): Promise<string | undefined> {
  const direct = config[variable];
  if (direct !== undefined) return configuredValue(direct);
  const arn = arnOf(config, variable);
  if (!arn) return undefined;
  const due = recheckAt.get(arn);
  const refresh = options.refresh === true && Date.now() - (fetchedAt.get(arn) ?? 0) >= REFRESH_INTERVAL_MS;
  const forceFetch = refresh || (due !== undefined && Date.now() >= due);
  if (forceFetch) fetchedAt.set(arn, Date.now());
  const value = configuredValue(String((await getSecret(arn, { maxAge: CACHE_SECONDS, forceFetch })) ?? ''));
  if (value !== undefined) recheckAt.delete(arn);
  else if (due === undefined || forceFetch) recheckAt.set(arn, Date.now() + NOT_CONFIGURED_RECHECK_MS);
  return value;
}

/** The secret's ARN: the Config's `<variable>_ARN`, or for a provider's secret the function's own variable. */
function arnOf(config: Config, variable: SecretSetting): string | undefined {
  const isProviders = (PROVIDER_SECRETS as readonly string[]).includes(variable);
  return (isProviders ? process.env[`${variable}_ARN`] : config[`${variable as ConfigSecret}_ARN`]) || undefined;
}
