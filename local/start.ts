/**
 * `npm start`: runs Ratchet on this machine until Ctrl-C, SIGTERM, or the end
 * of the process that started it.
 */
import { ConfigError, loadConfig } from '../lambda/config.ts';
import { InvalidSecretError } from '../lambda/http/webhook-signature.ts';
import { parseCommandLine } from './cli/command-line.ts';
import { DataFolderError } from './engine/data-folder.ts';
import { SchemaError } from './engine/schema.ts';
import { startLocalRuntime } from './runtime.ts';

parseCommandLine({
  name: 'ratchet start',
  usage: `usage: [VARIABLE=value …] ratchet start
  Runs Ratchet on this machine (the embedded engine in DATA_DIR, the HTTP API, history, effects, reconcile)
  until Ctrl-C. Configuration is by environment variable: PORT, HOST, DATA_DIR, WEBHOOK_SIGNING_SECRETS,
  GEMINI_API_KEY, RECONCILE_INTERVAL_SECONDS, EFFECTS_WEBHOOK_URL, EFFECTS_SIGNING_SECRET, … (see docs/contract.md).`,
  options: {},
});

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
  console.log(`Ratchet ready at ${runtime.url} (webhook: POST ${runtime.url}/webhooks/gemini, data: ${runtime.dataFile})`);
} catch (error) {
  const known = [ConfigError, InvalidSecretError, DataFolderError, SchemaError].some((type) => error instanceof type);
  const code = (error as NodeJS.ErrnoException).code;
  // The runtime has already stopped what it started.
  if (code === 'EADDRINUSE' || code === 'EACCES') {
    const { address, port } = error as NodeJS.ErrnoException & { address?: string; port?: number };
    const why = code === 'EADDRINUSE' ? 'is in use' : 'is not allowed';
    console.error(
      `ratchet: ${address ?? 'the address'}:${port ?? '?'} ${why}; set PORT (and HOST) to another one, or PORT=0 for any free port`,
    );
  } else console.error(known ? `ratchet: ${(error as Error).message}` : error);
  process.exit(1);
}
