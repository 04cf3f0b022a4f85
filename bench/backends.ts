/**
 * What each system costs a PostgreSQL server that several systems share:
 * each system connects under a login role of its own, and its figures count
 * that role's backends only, never the server's other clients (another
 * instance's idle polls, the bench's probes). CPU comes from each backend's
 * /proc/<pid>/stat; buffers from pg_stat_statements, which keeps them per
 * role. The server's own processes (WAL writer, checkpointer, autovacuum)
 * are nobody's and are not counted.
 */
import pg from 'pg';
import type { TestPostgres } from '../test/support/postgres.ts';
import { cpuMs } from './processes.ts';

/**
 * A backend's CPU is read every 100 ms and kept after it ends: a pool closes
 * a connection only after 10 s idle, so its last reading is its whole, and
 * one that ends mid-measurement does not take its CPU with it.
 */
const SAMPLE_MS = 100;

export class RoleBackends {
  /** Each backend ever seen (pid and start, so a reused pid is another): its role and its CPU at the last reading. */
  private readonly seen = new Map<string, { role: string; ms: number }>();
  private sampling: Promise<void> = Promise.resolve();
  private readonly timer: NodeJS.Timeout;

  private constructor(private readonly monitor: pg.Client) {
    this.timer = setInterval(() => void this.sample(), SAMPLE_MS);
  }

  /**
   * Turns pg_stat_statements on (a restart: it must be preloaded) and starts
   * watching `server`'s backends. `url` is a superuser's.
   */
  static async watch(server: TestPostgres): Promise<RoleBackends> {
    const setup = new pg.Client({ connectionString: server.url });
    await setup.connect();
    await setup.query(`ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`);
    await setup.end();
    await server.halt('fast');
    await server.resume();
    const monitor = new pg.Client({ connectionString: server.url, application_name: 'bench-monitor' });
    await monitor.connect();
    await monitor.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    return new RoleBackends(monitor);
  }

  /**
   * A login role for one system, and `url` as that role. Superuser, as the
   * bench's own role is: the seed creates its table in `public` and Ratchet
   * its schema, and the figures are about cost, not privileges.
   */
  async role(name: string, url: string): Promise<string> {
    await this.monitor.query(`CREATE ROLE ${name} LOGIN SUPERUSER`);
    const as = new URL(url);
    as.username = name;
    return as.href;
  }

  private sample(): Promise<void> {
    this.sampling = this.sampling.then(async () => {
      const { rows } = await this.monitor
        .query<{ pid: number; role: string; started: Date }>(
          `SELECT pid, usename AS role, backend_start AS started FROM pg_stat_activity WHERE backend_type = 'client backend' AND usename IS NOT NULL`,
        )
        .catch(() => ({ rows: [] }));
      for (const { pid, role, started } of rows) {
        try {
          this.seen.set(`${pid}@${started.getTime()}`, { role, ms: cpuMs(pid) });
        } catch {
          // ended since the listing: its last reading stands
        }
      }
    });
    return this.sampling;
  }

  /** CPU in ms that `role`'s backends have used, ended ones included, read now. */
  async cpuMs(role: string): Promise<number> {
    await this.sample();
    let sum = 0;
    for (const backend of this.seen.values()) if (backend.role === role) sum += backend.ms;
    return sum;
  }

  /** Shared buffers (hit or read) `role`'s statements have touched, those whose text matches `like` when given. */
  async buffers(role: string, like = '%'): Promise<number> {
    const { rows } = await this.monitor.query<{ n: string | null }>(
      `SELECT sum(s.shared_blks_hit + s.shared_blks_read) AS n FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid
       WHERE r.rolname = $1 AND s.query LIKE $2`,
      [role, like],
    );
    return Number(rows[0]?.n ?? 0);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sampling;
    await this.monitor.end();
  }
}
