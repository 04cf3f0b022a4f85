/**
 * `npm start`: runs Ratchet on this machine until Ctrl-C or SIGTERM.
 */
import { ConfigError, loadConfig } from '../lambda/config.ts';
import { InvalidSecretError } from '../lambda/http/webhook-signature.ts';
import { JavaMissingError } from './dynamodb-local.ts';
import { startLocalRuntime } from './runtime.ts';

async function main(): Promise<void> {
  const runtime = await startLocalRuntime(loadConfig());
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`Ratchet stopping (${signal})`);
    await runtime.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  if (runtime.devSecret) {
    console.log(`No WEBHOOK_SIGNING_SECRETS set; this run accepts deliveries signed with the development secret:\n  ${runtime.devSecret}`);
  }
  console.log(`Ratchet ready at ${runtime.url} (webhook: POST ${runtime.url}/webhooks/gemini, DynamoDB: ${runtime.dynamodbEndpoint})`);
}

main().catch((error: unknown) => {
  const known = error instanceof JavaMissingError || error instanceof ConfigError || error instanceof InvalidSecretError;
  console.error(known ? `ratchet: ${(error as Error).message}` : error);
  process.exit(1);
});
