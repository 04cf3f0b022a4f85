/**
 * `ratchet <command>`: the server package's one bin, and what every `npm run`
 * script of this repository calls. Each command is its own module, loaded only
 * when named, so `ratchet webhook` never loads the engine and `ratchet start`
 * never loads the AWS SDK.
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { unexpected, usageLine } from './command-line.ts';

const COMMANDS: Record<string, { about: string; load: () => Promise<unknown> }> = {
  start: { about: 'run Ratchet on this machine (the embedded engine in ./.ratchet-data or DATA_DIR)', load: () => import('../start.ts') },
  demo: { about: 'the whole system with a fake Gemini, playing an out-of-order story', load: () => import('./demo.ts') },
  webhook: { about: 'send one signed Gemini-style delivery to a running Ratchet', load: () => import('./webhook.ts') },
  redrive: { about: 'list or re-drive dead-lettered effects (locally, or --stack NAME)', load: () => import('./redrive.ts') },
  backup: { about: 'a consistent copy of the data folder while Ratchet runs', load: () => import('./backup.ts') },
  login: { about: 'a new one-time link that signs the console in', load: () => import('./login.ts') },
  connect: { about: 'connect a deployed stack to Gemini (webhook, secrets, ping)', load: () => import('./connect.ts') },
};

export const USAGE = `usage: ratchet <${Object.keys(COMMANDS).join('|')}> [options]`;
const HELP = `${USAGE}

${Object.entries(COMMANDS)
  .map(([name, { about }]) => `  ${name.padEnd(8)} ${about}`)
  .join('\n')}

ratchet <command> --help says more about each; ratchet --version says which Ratchet this is.
Configuration is by environment variable (docs/contract.md).`;

const [command, ...rest] = process.argv.slice(2);
if (command === '--help' || command === '-h' || command === 'help') {
  console.log(HELP);
  process.exit(0);
}
if (command === '--version' || command === '-v' || command === 'version') {
  console.log(`ratchet ${version()} (node ${process.version})`);
  process.exit(0);
}
// Whatever no command expected: one line and where its details are, never a stack trace.
const name = `ratchet${command && command in COMMANDS ? ` ${command}` : ''}`;
process.on('uncaughtException', (error) => unexpected({ name }, error));
process.on('unhandledRejection', (error) => unexpected({ name }, error));
const chosen = command === undefined ? undefined : COMMANDS[command];
if (!chosen) {
  const why =
    command === undefined ? 'no command given' : command.startsWith('-') ? `unknown option ${command}` : `unknown command ${command}`;
  console.error(usageLine('ratchet', why, USAGE));
  process.exit(2);
}
// The command reads its own arguments from process.argv, as if run alone.
process.argv.splice(2, process.argv.length - 2, ...rest);
await chosen.load();

/** This Ratchet's version: the manifest above this file (the repository's, or the installed @ratchet/server's). */
function version(): string {
  for (let dir = import.meta.dirname; dirname(dir) !== dir; dir = dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (manifest.name === 'ratchet' || manifest.name === '@ratchet/server') return manifest.version ?? 'unknown';
    } catch {
      // no manifest here: look further up
    }
  }
  return 'unknown';
}
