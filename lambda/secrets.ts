/**
 * The one way a function reads a secret setting: the variable itself (local,
 * tests), else the Secrets Manager secret named by `<variable>_ARN` (AWS),
 * cached for 5 minutes so a rotation lands without a deploy.
 */
import { getSecret } from '@aws-lambda-powertools/parameters/secrets';
import type { Config } from './config.ts';

type SecretSetting = 'WEBHOOK_SIGNING_SECRETS' | 'EFFECTS_SIGNING_SECRET' | 'GEMINI_API_KEY';

export async function secretSetting(config: Config, variable: SecretSetting): Promise<string | undefined> {
  const direct = config[variable];
  if (direct) return direct;
  const arn = config[`${variable}_ARN`];
  if (!arn) return undefined;
  return String((await getSecret(arn, { maxAge: 300 })) ?? '') || undefined;
}
