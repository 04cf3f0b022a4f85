/**
 * `npm start`: runs Ratchet on this machine until Ctrl-C, SIGTERM, or the end
 * of the process that started it.
 */

import { failure, parseCommandLine, unexpected } from '../app/command-line.ts';
import { ConfigError, loadConfig } from '../app/config.ts';
import { EngineUnavailableError } from '../app/engine.ts';
import { InvalidSecretError } from '../app/signing-secrets.ts';
import { DataFolderError, SchemaError } from '../engines/sqlite/index.ts';
import { TokenConfigError } from './access/api-token.ts';
import { startLocalRuntime } from './runtime.ts';

parseCommandLine({
  name: 'ratchet start',
  usage: `usage: [VARIABLE=value …] ratchet start
  Runs Ratchet on this machine (the embedded engine in DATA_DIR, the HTTP API, history, effects, reconcile)
  until Ctrl-C. Configuration is by environment variable: PORT, HOST, DATA_DIR, WEBHOOK_SIGNING_SECRETS,
  GEMINI_API_KEY (or GEMINI_API_KEYS), RECONCILE_INTERVAL_SECONDS, OVERDUE_AFTER, EFFECTS_WEBHOOK_URL, EFFECTS_SIGNING_SECRET,
  RATCHET_API_TOKEN, PUBLIC_URL, … (see docs/contract.md). Every route but the webhook and /healthz needs the API token.`,
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
  // Paths and how to use them, never a secret or a token: this output lands in terminals' scrollback and in logs.
  if (runtime.devSecret) {
    console.log(
      runtime.devSecretFile
        ? `Webhooks: no WEBHOOK_SIGNING_SECRETS set; deliveries signed with the development secret in ${runtime.devSecretFile} are accepted (the same after a restart): export WEBHOOK_SIGNING_SECRETS=$(cat ${runtime.devSecretFile})`
        : 'Webhooks: no WEBHOOK_SIGNING_SECRETS set and no data folder: a development secret for this run only; set WEBHOOK_SIGNING_SECRETS to sign with one you know',
    );
  }
  const { source, file } = runtime.tokens;
  console.log(
    source === 'RATCHET_API_TOKEN'
      ? 'API: every route but the webhook and /healthz needs Authorization: Bearer <a token of RATCHET_API_TOKEN>'
      : file
        ? `API: every route but the webhook and /healthz needs Authorization: Bearer <the token in ${file}>${source === 'generated' ? ' (generated now, owner-only)' : ''}, e.g. curl -H "Authorization: Bearer $(cat ${file})" ${runtime.url}/operations`
        : 'API: every route but the webhook and /healthz needs a token: this run generated one it keeps in memory only; set RATCHET_API_TOKEN to call the API',
  );
  console.log(`Console: ${await runtime.loginLink()} (signs in once, within 15 minutes; or sign in with the API token)`);
  console.log(`Ratchet ready at ${runtime.url} (webhook: POST ${runtime.url}/webhooks/gemini, data: ${runtime.dataFile})`);
} catch (error) {
  // The runtime has already stopped what it started, and removed a data folder it created.
  exitOnStartFailure(error);
}

/**
 * A start that failed: one line, never a stack trace. A setting that cannot be
 * used exits 2 (like bad usage: change the command); a condition of this
 * machine (the port or the data folder in use, a newer schema, the database
 * unreachable) exits 1.
 */
function exitOnStartFailure(error: unknown): never {
  const command = { name: 'ratchet' };
  if ([ConfigError, TokenConfigError, InvalidSecretError].some((type) => error instanceof type)) {
    console.error(`ratchet: ${(error as Error).message}`);
    process.exit(2);
  }
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'EADDRINUSE' || code === 'EACCES' || code === 'EADDRNOTAVAIL') {
    const { address, port } = error as NodeJS.ErrnoException & { address?: string; port?: number };
    const why = code === 'EADDRINUSE' ? 'is in use' : code === 'EACCES' ? 'is not allowed' : 'is not an address of this machine';
    failure(command, `${address ?? 'the address'}:${port ?? '?'} ${why}; set PORT (and HOST) to another one, or PORT=0 for any free port`);
  }
  if ([DataFolderError, SchemaError, EngineUnavailableError].some((type) => error instanceof type))
    failure(command, (error as Error).message);
  unexpected(command, error);
}
