/**
 * PgBouncer (Debian's package) in transaction mode in front of the run's
 * PostgreSQL server: what hosted poolers (Supavisor, Neon's, RDS Proxy) give
 * an app. Each transaction may run on another server connection, so anything
 * a connection keeps between transactions is lost: the tests through it prove
 * Ratchet keeps none on its hot path. As root it runs as the `postgres` user
 * (PgBouncer refuses root).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { asOwner, freePort } from './postgres.ts';

export const PGBOUNCER = ['/usr/sbin/pgbouncer', '/usr/bin/pgbouncer'].find((path) => existsSync(path));

export interface TestPgBouncer {
  url: string;
  stop(): Promise<void>;
  /** Stops PgBouncer at once (every client connection cut), and starts it again on the same port `downMs` later. */
  restart(downMs: number): Promise<void>;
}

export async function startPgBouncer(serverUrl: string, poolSize = 4): Promise<TestPgBouncer> {
  if (!PGBOUNCER) throw new Error('PgBouncer is not installed: apt-get install pgbouncer');
  const server = new URL(serverUrl);
  const dir = mkdtempSync(join(tmpdir(), 'ratchet-pgbouncer-'));
  const port = await freePort();
  writeFileSync(join(dir, 'users.txt'), `"${server.username}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    `[databases]
postgres = host=${server.hostname} port=${server.port} dbname=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = trust
auth_file = ${join(dir, 'users.txt')}
pool_mode = transaction
default_pool_size = ${poolSize}
max_client_conn = 500
ignore_startup_parameters = extra_float_digits,options
logfile = ${join(dir, 'pgbouncer.log')}
`,
  );
  if (process.getuid?.() === 0) {
    const { execFileSync } = await import('node:child_process');
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    for (const file of ['', 'users.txt', 'pgbouncer.ini']) chownSync(join(dir, file), uid, gid);
  }
  const url = `postgres://${server.username}@127.0.0.1:${port}/postgres`;
  const launch = async (): Promise<ChildProcess> => {
    const child: ChildProcess = spawn(...asOwner(PGBOUNCER, [join(dir, 'pgbouncer.ini')]), { stdio: 'ignore' });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const client = new pg.Client({ connectionString: url });
      try {
        await client.connect();
        await client.query('SELECT 1');
        await client.end();
        return child;
      } catch (error) {
        await client.end().catch(() => undefined);
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`PgBouncer did not start: ${(error as Error).message}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  };
  // SIGTERM: PgBouncer stops at once, cutting every connection (SIGINT would wait for them).
  const halt = async (child: ChildProcess) => {
    child.kill('SIGTERM');
    await new Promise((resolve) => (child.exitCode !== null ? resolve(undefined) : child.once('exit', resolve)));
  };
  let child = await launch();
  return {
    url,
    stop: async () => {
      await halt(child);
      rmSync(dir, { recursive: true, force: true });
    },
    restart: async (downMs) => {
      await halt(child);
      await new Promise((resolve) => setTimeout(resolve, downMs));
      child = await launch();
    },
  };
}
