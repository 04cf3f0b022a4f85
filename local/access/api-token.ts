/**
 * The API token: what every route but the webhook and `/healthz` asks for
 * (`Authorization: Bearer <token>`). From RATCHET_API_TOKEN (several, space-
 * or comma-separated, for rotation), else the token file in the data folder
 * (`api-token`, owner-only). On loopback with neither, one is generated into
 * that file; anywhere else Ratchet refuses to start without one. The token is
 * never printed or logged: only the file's path is.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listOf } from '../../app/config.ts';
import { readDataFolderFile } from '../../engines/sqlite/index.ts';

export const TOKEN_FILE = 'api-token';
/** What a bearer token may hold (RFC 6750's token68), and at least this long: a guessable token is no token. */
const TOKEN = /^[A-Za-z0-9._~+/-]+=*$/;
export const MIN_TOKEN_LENGTH = 16;

/** A token setting that cannot be used: Ratchet does not start (exit 2). */
export class TokenConfigError extends Error {
  override name = 'TokenConfigError';
}

export interface ApiTokens {
  /** Every accepted token (several during a rotation). */
  tokens: string[];
  /** Where they came from, for the start line: never the values. */
  source: 'RATCHET_API_TOKEN' | 'token file' | 'generated';
  /** The token file, when that is the source. */
  file?: string;
}

export function parseTokens(value: string, what: string): string[] {
  const tokens = listOf(value);
  if (tokens.length === 0) throw new TokenConfigError(`${what} holds no token`);
  tokens.forEach((token, i) => {
    if (!TOKEN.test(token) || token.length < MIN_TOKEN_LENGTH)
      throw new TokenConfigError(
        `${what}: token #${i + 1} must be at least ${MIN_TOKEN_LENGTH} characters of A-Z a-z 0-9 . _ ~ + / - (e.g. openssl rand -base64 32)`,
      );
  });
  return tokens;
}

/** Loopback names: a server bound only to them cannot be reached from another host. */
export function isLoopback(host: string): boolean {
  const bare = host.replace(/^\[|\]$/g, '');
  return bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare);
}

/**
 * The tokens for a runtime on `host` with its data in `dataDir` (`:memory:`:
 * no folder, so a generated token lives only as long as the process). With
 * `generate: false` (before the data folder is locked) nothing is written:
 * undefined means one would be generated.
 */
export function resolveApiTokens(
  env: string | undefined,
  dataDir: string,
  host: string,
  options: { generate: boolean } = { generate: true },
): ApiTokens | undefined {
  if (env !== undefined && env.trim() !== '') return { tokens: parseTokens(env, 'RATCHET_API_TOKEN'), source: 'RATCHET_API_TOKEN' };
  const file = dataDir === ':memory:' ? undefined : join(dataDir, TOKEN_FILE);
  if (file && existsSync(file)) return { tokens: parseTokens(readFileSync(file, 'utf8'), file), source: 'token file', file };
  if (!isLoopback(host))
    throw new TokenConfigError(
      `HOST=${host} can be reached from other hosts: set RATCHET_API_TOKEN (or put a token in ${file ?? 'DATA_DIR/api-token'}) before serving there`,
    );
  if (!options.generate) return undefined;
  const token = randomBytes(32).toString('base64url');
  if (file) writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return { tokens: [token], source: 'generated', ...(file && { file }) };
}

/**
 * The token a command-line tool sends to a running Ratchet: RATCHET_API_TOKEN
 * (its first), else the token file of the data folder it points at
 * (DATA_DIR, default ./.ratchet-data); undefined when there is neither.
 */
export function tokenForCommands(env: NodeJS.ProcessEnv): string | undefined {
  return listOf(env.RATCHET_API_TOKEN ?? '')[0] ?? listOf(readDataFolderFile(env, TOKEN_FILE) ?? '')[0];
}
