/**
 * The command-line tools' one way with arguments: `--help` prints the usage
 * and exits 0; bad usage is one line on stderr and exit 2; a failure is one
 * line and exit 1. Never a stack trace.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { inspect, type ParseArgsConfig, parseArgs } from 'node:util';

export type Options = NonNullable<ParseArgsConfig['options']>;

export interface CommandLine<O extends Options> {
  /** `ratchet NAME`: names the command in its one-line messages. */
  name: string;
  /** The whole `--help` text, its first line `usage: …`. */
  usage: string;
  options: O;
  /** How many positional arguments it takes (default none). */
  positionals?: { min: number; max: number };
}

export function parseCommandLine<O extends Options>(command: CommandLine<O>, args = process.argv.slice(2)) {
  let parsed: ReturnType<typeof parseArgs<{ options: O & { help: { type: 'boolean' } }; allowPositionals: true; args: string[] }>>;
  try {
    parsed = parseArgs({ args, options: { ...command.options, help: { type: 'boolean' } }, allowPositionals: true });
  } catch (error) {
    // Node's own message goes on to explain `--` for positionals: its first sentence is the point.
    return usageError(command, (error as Error).message.split(/\.\s/)[0] as string);
  }
  if ((parsed.values as { help?: boolean }).help) {
    console.log(command.usage);
    process.exit(0);
  }
  const { min, max } = command.positionals ?? { min: 0, max: 0 };
  if (parsed.positionals.length < min || parsed.positionals.length > max) {
    const what = parsed.positionals.length < min ? 'missing arguments' : `unexpected argument ${parsed.positionals[max]}`;
    return usageError(command, what);
  }
  return parsed;
}

/** Bad usage: one line, with the usage, on stderr; exit 2. */
export function usageError(command: { name: string; usage: string }, message: string): never {
  console.error(usageLine(command.name, message, command.usage));
  process.exit(2);
}

/** `name: message (usage: …; see --help)`, the usage's first line only. */
export function usageLine(name: string, message: string, usage: string): string {
  const first = (usage.split('\n')[0] as string).replace(/^usage:\s*/, '');
  return `${name}: ${message} (usage: ${first}; see --help)`;
}

/** A failure: one line, exit 1. */
export function failure(command: { name: string }, message: string): never {
  console.error(`${command.name}: ${message}`);
  process.exit(1);
}

/**
 * Something no command expected: one line naming it and where its details are
 * (a file with the stack, owner-only), exit 1. A stack trace never reaches a
 * user's terminal.
 */
export function unexpected(command: { name: string }, error: unknown): never {
  const file = join(tmpdir(), `ratchet-error-${new Date().toISOString().replace(/[:.]/g, '-')}-${process.pid}.log`);
  let where = `details in ${file}`;
  try {
    writeFileSync(file, `${new Date().toISOString()} ${command.name} (node ${process.version})\n${inspect(error, { depth: 6 })}\n`, {
      mode: 0o600,
    });
  } catch {
    where = 'its details could not be written';
  }
  const message = error instanceof Error ? error.message : String(error);
  console.error(`${command.name}: unexpected error: ${message.split('\n')[0]} (${where})`);
  process.exit(1);
}

/** One command of a program: what `--help` says of it, and its module, loaded only when named. */
export interface Subcommand {
  about: string;
  load: () => Promise<unknown>;
}

/**
 * A program of subcommands (`ratchet <command>`, `ratchet-aws <command>`):
 * `--help`, `--version` (the version of the first manifest above `from` whose
 * name is in `manifests`), one line for bad usage, and the named command run
 * as if alone, reading its own arguments from process.argv.
 */
export async function runProgram(program: {
  name: string;
  commands: Record<string, Subcommand>;
  footer: string;
  /** Commands another program runs: named → where (one line, exit 2), not listed in --help. */
  elsewhere?: Record<string, string>;
  manifests: string[];
  from: string;
}): Promise<void> {
  const { name, commands } = program;
  const usage = `usage: ${name} <${Object.keys(commands).join('|')}> [options]`;
  const [command, ...rest] = process.argv.slice(2);
  if (command === '--help' || command === '-h' || command === 'help') {
    const list = Object.entries(commands).map(([key, { about }]) => `  ${key.padEnd(8)} ${about}`);
    console.log(`${usage}\n\n${list.join('\n')}\n\n${program.footer}`);
    process.exit(0);
  }
  if (command === '--version' || command === '-v' || command === 'version') {
    console.log(`${name} ${manifestVersion(program.from, program.manifests)} (node ${process.version})`);
    process.exit(0);
  }
  // Whatever no command expected: one line and where its details are, never a stack trace.
  const known = command !== undefined && Object.hasOwn(commands, command);
  const running = { name: `${name}${known ? ` ${command}` : ''}` };
  process.on('uncaughtException', (error) => unexpected(running, error));
  process.on('unhandledRejection', (error) => unexpected(running, error));
  const chosen = known ? commands[command as string] : undefined;
  if (!chosen) {
    const moved =
      command !== undefined && program.elsewhere && Object.hasOwn(program.elsewhere, command) ? program.elsewhere[command] : undefined;
    const why =
      command === undefined
        ? 'no command given'
        : moved
          ? `${command} is ${moved}`
          : command.startsWith('-')
            ? `unknown option ${command}`
            : `unknown command ${command}`;
    console.error(usageLine(name, why, usage));
    process.exit(2);
  }
  process.argv.splice(2, process.argv.length - 2, ...rest);
  await chosen.load();
}

/** The version of the first manifest above `from` named one of `names` (the repository's, or the installed package's). */
function manifestVersion(from: string, names: string[]): string {
  for (let dir = from; dirname(dir) !== dir; dir = dirname(dir)) {
    try {
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: string; version?: string };
      if (manifest.name && names.includes(manifest.name)) return manifest.version ?? 'unknown';
    } catch {
      // no manifest here: look further up
    }
  }
  return 'unknown';
}
