/**
 * The command-line tools' one way with arguments: `--help` prints the usage
 * and exits 0; bad usage is one line on stderr and exit 2; a failure is one
 * line and exit 1. Never a stack trace.
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
