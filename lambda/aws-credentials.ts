/**
 * Stands in for `@aws-sdk/credential-provider-node` in the Lambda bundles
 * (see lib/lambda-bundle.ts): the Lambda runtime puts the function role's
 * credentials in AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_SESSION_TOKEN, so the SDK's environment provider is the whole chain
 * there. Outside a bundle (tests, the CLI) the SDK's default chain applies.
 */
import { fromEnv } from '@aws-sdk/credential-provider-env';

/** The signature the SDK's clients call: `defaultProvider(init)`; the options of the other providers do not apply. */
export const defaultProvider = (_init?: unknown): ReturnType<typeof fromEnv> => fromEnv();
