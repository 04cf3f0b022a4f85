/**
 * `npm start`: runs Ratchet on this machine until Ctrl-C, SIGTERM, or the end
 * of the process that started it.
 */
// Node 20 is supported here; the SDK's notice about it is noise. Set before the SDK loads.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const { ConfigError, loadConfig } = await import('../lambda/config.ts');
const { InvalidSecretError } = await import('../lambda/http/webhook-signature.ts');
const { JavaMissingError } = await import('./dynamodb-local.ts');
const { startLocalRuntime } = await import('./runtime.ts');

try {
  const runtime = await startLocalRuntime(loadConfig());
  let stopping = false;
  const shutdown = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`Ratchet stopping (${reason})`);
    await runtime.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void shutdown('SIGINT'));
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  // npm does not always pass SIGTERM on to its script: stop when the parent is gone.
  const parent = process.ppid;
  setInterval(() => process.ppid !== parent && void shutdown('parent exited'), 1_000).unref();
  if (runtime.devSecret) {
    console.log(
      `No WEBHOOK_SIGNING_SECRETS set; deliveries signed with the development secret are accepted (kept in the data folder, the same after a restart):\n  ${runtime.devSecret}`,
    );
  }
  console.log(`Ratchet ready at ${runtime.url} (webhook: POST ${runtime.url}/webhooks/gemini, DynamoDB: ${runtime.dynamodbEndpoint})`);
} catch (error) {
  const known = error instanceof JavaMissingError || error instanceof ConfigError || error instanceof InvalidSecretError;
  const code = (error as NodeJS.ErrnoException).code;
  // The runtime has already stopped what it started (DynamoDB Local included).
  if (code === 'EADDRINUSE' || code === 'EACCES') {
    const { address, port } = error as NodeJS.ErrnoException & { address?: string; port?: number };
    const why = code === 'EADDRINUSE' ? 'is in use' : 'is not allowed';
    console.error(
      `ratchet: ${address ?? 'the address'}:${port ?? '?'} ${why}; set PORT (and HOST) to another one, or PORT=0 for any free port`,
    );
  } else console.error(known ? `ratchet: ${(error as Error).message}` : error);
  process.exit(1);
}
