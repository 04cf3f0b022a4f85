/**
 * The one way a function reads a secret setting: the variable itself (local,
 * tests), else the Secrets Manager secret named by `<variable>_ARN` (AWS),
 * cached for 5 minutes so a rotation lands without a deploy.
 */
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import type { Config } from './config.ts';

type SecretSetting = 'WEBHOOK_SIGNING_SECRETS' | 'EFFECTS_SIGNING_SECRET' | 'GEMINI_API_KEY';

/** What the stack stores in each secret until it is set: "not configured", never a value to use. */
export const NOT_CONFIGURED = 'not-configured';

/** The setting's value, or undefined when it is not configured (unset, empty, or the stack's placeholder). */
export async function secretSetting(config: Config, variable: SecretSetting): Promise<string | undefined> {
  const arn = config[`${variable}_ARN`];
  const value = config[variable] ?? (arn ? String((await getSecret(arn, { maxAge: 300 })) ?? '') : '');
  const trimmed = value.trim();
  return trimmed === '' || trimmed === NOT_CONFIGURED ? undefined : trimmed;
}
