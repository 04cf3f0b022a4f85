/**
 * A real PostgreSQL server for the tests: a throwaway cluster (initdb, pg_ctl)
 * in a temporary folder on a loopback port, removed after; or the server at
 * RATCHET_TEST_DATABASE_URL when one is given. initdb refuses to run as root:
 * as root the cluster is the `postgres` user's (runuser). Debian's PostgreSQL
 * packages are found on PATH or under /usr/lib/postgresql/<major>/bin.
 */
import { execFile } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestPostgres {
  /** A superuser's URL (`ratchet`, trust on loopback), to the `postgres` database. */
  url: string;
  /** The server's folder and port, for tools that start beside it (PgBouncer). */
  dir: string;
  /** The cluster's data folder (its postmaster.pid names the server's process). */
  dataDir?: string;
  port: number;
  stop(): Promise<void>;
  /** Stops the server as a crash (`immediate`) or an orderly restart or failover (`fast`) would, keeping its data. */
  halt(mode: 'immediate' | 'fast'): Promise<void>;
  /** Starts it again on the same port and data (after `halt`). */
  resume(): Promise<void>;
}

/** The folder of PostgreSQL's server binaries: initdb's on PATH, else the newest under /usr/lib/postgresql. */
export function postgresBin(): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a));
  for (const major of majors) if (existsSync(join(root, major, 'bin', 'initdb'))) return join(root, major, 'bin');
  return undefined;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** `command` as the cluster's owner: the `postgres` user when this process is root. */
export function asOwner(command: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', command, ...args]] : [command, args];
}

/**
 * `durable`: the server's defaults (fsync on), for the bench; the tests run it without fsync.
 * `tls`: PEM texts of the server's certificate and key, served with `ssl=on` (see tls.ts).
 */
export async function startPostgres(options: { durable?: boolean; tls?: { cert: string; key: string } } = {}): Promise<TestPostgres> {
  const given = process.env.RATCHET_TEST_DATABASE_URL;
  if (given) {
    const cannot = async () => {
      throw new Error('RATCHET_TEST_DATABASE_URL names a server the tests cannot stop and start');
    };
    return { url: given, dir: '', port: Number(new URL(given).port || 5432), stop: async () => {}, halt: cannot, resume: cannot };
  }
  const bin = postgresBin();
  if (!bin) throw new Error('PostgreSQL is not installed (initdb): apt-get install postgresql, or set RATCHET_TEST_DATABASE_URL');
  const dir = mkdtempSync(join(tmpdir(), 'ratchet-pg-'));
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: group } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(group.trim()));
  }
  const data = join(dir, 'data');
  await run(...asOwner(join(bin, 'initdb'), ['-D', data, '-U', 'ratchet', '--auth=trust', '-E', 'UTF8', '--no-sync', '--no-instructions']));
  const port = await freePort();
  // fsync off: the tests kill Ratchet's processes, never the server; the bench runs its own with the defaults.
  let settings = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c max_connections=300${options.durable ? '' : ' -c fsync=off -c full_page_writes=off'}`;
  if (options.tls) {
    // The server reads its key only when the key is its own user's and private.
    for (const [file, text] of [
      ['server.crt', options.tls.cert],
      ['server.key', options.tls.key],
    ] as const) {
      writeFileSync(join(dir, file), text, { mode: 0o600 });
      if (process.getuid?.() === 0) chownSync(join(dir, file), statSync(dir).uid, statSync(dir).gid);
    }
    settings += ` -c ssl=on -c ssl_cert_file=${join(dir, 'server.crt')} -c ssl_key_file=${join(dir, 'server.key')}`;
  }
  const startServer = async () => {
    await run(...asOwner(join(bin, 'pg_ctl'), ['-D', data, '-o', settings, '-l', join(dir, 'server.log'), '-w', '-t', '60', 'start']));
  };
  await startServer();
  return {
    halt: async (mode) => {
      await run(...asOwner(join(bin, 'pg_ctl'), ['-D', data, '-m', mode, '-w', 'stop']));
    },
    resume: startServer,
    url: `postgres://ratchet@127.0.0.1:${port}/postgres`,
    dataDir: data,
    dir,
    port,
    stop: async () => {
      await run(...asOwner(join(bin, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop'])).catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
