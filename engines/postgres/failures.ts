/**
 * Why a database cannot be used, in one line that names the cause and the
 * setting to change (never a password): what `ratchet start`, the library and
 * `ratchet migrate` say when the engine does not open. `configuration` is a
 * setting to change (the command exits 2); `condition` is the database's
 * state (exit 1: try again, or fix the server).
 */
import { networkCodeOf, networkFailureInWords } from '../../core/network.ts';
import { sqlStateOf, unanswered } from './database.ts';
import { SchemaError } from './schema.ts';

export interface DatabaseFailure {
  kind: 'configuration' | 'condition';
  /** The setting the line names first, when it is one. */
  setting?: string;
  message: string;
}

export interface DatabasePlace {
  /** The database in words, no user or password: `postgres://host:5432/db?schema=ratchet`. */
  where: string;
  schema: string;
  /** The role it connects as (from DATABASE_URL), for the GRANT that fixes a missing privilege. */
  role?: string;
  database?: string;
}

/** Where a DATABASE_URL points, in words (no user or password), with the role and database a GRANT names. */
export function placeOf(databaseUrl: string | undefined, schema: string): DatabasePlace {
  if (!databaseUrl) return { where: `the application's pool, schema ${schema}`, schema };
  const url = new URL(databaseUrl);
  return {
    where: `postgres://${url.hostname}:${url.port || 5432}${url.pathname || '/'}?schema=${schema}`,
    schema,
    ...(url.username && { role: decodeURIComponent(url.username) }),
    ...(url.pathname.length > 1 && { database: decodeURIComponent(url.pathname.slice(1)) }),
  };
}

const CONDITIONS: Readonly<Record<string, string>> = {
  '28P01': 'the password was refused',
  '28000': 'the role may not connect',
  '3D000': 'the database does not exist',
  '53300': 'the server has too many connections now',
  '57P03': 'the server is starting up or shutting down',
};

/** The one line for `error`, or undefined for an error that is not the database's (a bug: said as such by the caller). */
export function databaseFailure(error: unknown, place: DatabasePlace): DatabaseFailure | undefined {
  if (error instanceof SchemaError) return { kind: 'condition', message: error.message };
  const message = String((error as Error)?.message ?? '');
  if (/does not support SSL/i.test(message))
    return {
      kind: 'configuration',
      setting: 'DATABASE_URL',
      message:
        `DATABASE_URL asks for TLS (its sslmode) but the server at ${place.where} does not offer it: ` +
        'remove sslmode from the URL (or use sslmode=disable) for a server on a private network, or turn TLS on at the server',
    };
  if (
    /self[- ]signed certificate|unable to verify the first certificate|certificate has expired|Hostname\/IP does not match/i.test(message)
  )
    return {
      kind: 'configuration',
      setting: 'DATABASE_URL',
      message: `DATABASE_URL: the server's TLS certificate is not trusted (${message.split('\n')[0]}): give its CA with sslrootcert=/path/to/ca.pem in the URL`,
    };
  const state = sqlStateOf(error);
  if (state === '42P07') {
    const table = /relation "([^"]+)" already exists/.exec(message)?.[1] ?? 'a table';
    return {
      kind: 'configuration',
      setting: 'DATABASE_SCHEMA',
      message:
        `DATABASE_SCHEMA=${place.schema} already holds ${table === 'a table' ? table : `a table named ${table}`} that is not Ratchet's: ` +
        'give Ratchet a schema of its own (the default, ratchet); it never shares one with other tables',
    };
  }
  if (state === '42501') return { kind: 'configuration', setting: 'DATABASE_URL', message: privilegeInWords(message, place) };
  if (state && CONDITIONS[state]) return { kind: 'condition', message: `the database (${place.where}): ${CONDITIONS[state]}` };
  if (unanswered(error))
    return {
      kind: 'condition',
      message: `cannot reach the database (${place.where}): no answer in time (DATABASE_CONNECT_TIMEOUT_MS, DATABASE_STATEMENT_TIMEOUT_MS)`,
    };
  if (networkCodeOf(error))
    return { kind: 'condition', message: `cannot reach the database (${place.where}): ${networkFailureInWords(error)}` };
  return undefined;
}

/** A missing privilege, named with the GRANT that gives it (docs/operations.md has the whole block). */
function privilegeInWords(message: string, place: DatabasePlace): string {
  const role = place.role ? quoted(place.role) : '<the role>';
  const schema = quoted(place.schema);
  const on = /permission denied for (database|schema|table|sequence|relation) "?([^"\s]+)"?/i.exec(message);
  const object = on?.[1]?.toLowerCase();
  const grant =
    object === 'database'
      ? `GRANT CREATE ON DATABASE ${quoted(on?.[2] ?? place.database ?? '<database>')} TO ${role}; (to create the schema: or create it, or run ratchet migrate, as a role that may)`
      : object === 'schema'
        ? `GRANT USAGE, CREATE ON SCHEMA ${schema} TO ${role}; (CREATE only to migrate: or run ratchet migrate as its owner and start with DATABASE_MIGRATE=off)`
        : object === 'sequence'
          ? `GRANT USAGE ON ALL SEQUENCES IN SCHEMA ${schema} TO ${role};`
          : `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role};`;
  const who = place.role ? `the role ${place.role}` : 'the role';
  return `DATABASE_URL: ${who} lacks a privilege on ${place.where} (${message.split('\n')[0]}): ${grant}`;
}

/** An identifier as SQL writes it: bare when it is plain lower case, else in double quotes. */
function quoted(name: string): string {
  return /^[a-z_][a-z0-9_]*$/.test(name) ? name : `"${name.replace(/"/g, '""')}"`;
}
