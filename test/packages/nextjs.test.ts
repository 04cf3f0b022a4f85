/**
 * Ratchet inside a Next.js app, from the packed tarball (docs/apps.md,
 * "Inside your app"): `createRatchet` mounted in a route handler
 * (`app/api/ratchet/[[...path]]/route.js`), `tick` from a cron route, `onChange`
 * writing each change in its delivery's transaction; a production build run
 * by two `next start` processes on one PostgreSQL database (test/packages/apps/nextjs).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { type FreshApp, freshApp, locked } from '../support/fresh-app.ts';
import { collectOutput } from '../support/output.ts';
import { freePort } from '../support/postgres.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';
import { shuffle } from '../support/shuffle.ts';

const tarballs = inject('tarballs');
const url = inject('postgresUrl');
const secret = newSecret();
const TOKEN = 'nextjs-test-token-0123456789abcdef';
const CRON_SECRET = 'nextjs-cron-secret-0123456789';
const schema = `next_${Date.now().toString(36)}`;
const pool = new pg.Pool({ connectionString: url });
let app: FreshApp;
const servers: Array<{ child: ChildProcess; origin: string }> = [];

async function nextStart(): Promise<{ child: ChildProcess; origin: string }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [join(app.dir, 'node_modules/next/dist/bin/next'), 'start', '-p', String(port), '-H', '127.0.0.1'],
    {
      cwd: app.dir,
      env: {
        PATH: process.env.PATH,
        NEXT_TELEMETRY_DISABLED: '1',
        DATABASE_URL: url,
        DATABASE_SCHEMA: schema,
        WEBHOOK_SIGNING_SECRETS: secret,
        RATCHET_API_TOKEN: TOKEN,
        CRON_SECRET,
        POWERTOOLS_LOG_LEVEL: 'ERROR',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    },
  );
  const output = collectOutput(child);
  const origin = `http://127.0.0.1:${port}`;
  const server = { child, origin };
  servers.push(server);
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`next start exited: ${output().slice(-1000)}`);
      return (await fetch(`${origin}/api/ratchet/healthz`).catch(() => undefined))?.status === 200;
    },
    60_000,
    `next start on ${port}`,
  );
  return server;
}

beforeAll(async () => {
  app = await freshApp('nextjs', [tarballs.server as string, locked('next'), locked('react'), locked('react-dom')], { type: 'module' });
  for (const part of ['app', 'lib', 'next.config.mjs']) app.copy(join(PROJECT_ROOT, 'test/packages/apps/nextjs', part), part);
  await app.exec(process.execPath, [join(app.dir, 'node_modules/next/dist/bin/next'), 'build'], { NEXT_TELEMETRY_DISABLED: '1' });
  await pool.query('DROP TABLE IF EXISTS app_changes');
  await pool.query('CREATE TABLE app_changes (id text NOT NULL, name text NOT NULL, version int NOT NULL, pid int NOT NULL, at serial)');
  // Both at once on an empty schema: the migration runs once, under its lock.
  await Promise.all([nextStart(), nextStart()]);
}, 400_000);

afterAll(async () => {
  for (const { child } of servers) {
    try {
      process.kill(-(child.pid as number), 'SIGKILL');
    } catch {
      // gone already
    }
  }
  await pool.end();
  app?.remove();
});

const bearer = { authorization: `Bearer ${TOKEN}` };

describe('Ratchet in a Next.js app on PostgreSQL', () => {
  it('takes signed webhooks on two next start processes, ticks from the cron route, and hands each change to onChange once, in order', async () => {
    const [one, two] = servers as unknown as [{ origin: string }, { origin: string }];
    const names = Array.from({ length: 16 }, (_, i) => `interactions/next-${i}`);
    const deliveries = shuffle(
      names.flatMap((name) => [
        ['interaction.requires_action', name],
        ['interaction.completed', name],
      ]),
      11,
    );
    for (let i = 0; i < deliveries.length; i += 8)
      await Promise.all(
        deliveries.slice(i, i + 8).map(async ([type, name], k) => {
          const { body, headers } = signedDelivery(secret, envelope(type as string, { id: name }));
          const origin = (i + k) % 2 === 0 ? one.origin : two.origin;
          const answer = await fetch(`${origin}/api/ratchet/webhooks/gemini`, { method: 'POST', headers, body });
          expect(answer.status, await answer.text()).toBe(200);
        }),
      );
    const expected = new Set<string>();
    for (const name of names) {
      const answer = await fetch(`${two.origin}/api/ratchet/operations/${name}/history`, { headers: bearer });
      const { history } = (await answer.json()) as { history: Array<{ version: number; stateChanged: boolean }> };
      for (const entry of history) if (entry.stateChanged) expected.add(`${name}#${entry.version}`);
    }
    expect(expected.size).toBeGreaterThanOrEqual(names.length);

    expect((await fetch(`${one.origin}/api/ratchet-tick`)).status).toBe(401);
    const tick = (origin: string) => fetch(`${origin}/api/ratchet-tick`, { headers: { authorization: `Bearer ${CRON_SECRET}` } });
    for (let round = 0; round < 20; round++) {
      const answers = await Promise.all([tick(one.origin), tick(two.origin)]);
      for (const answer of answers) expect(answer.status).toBe(200);
      const { rows } = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM app_changes');
      if ((rows[0]?.n ?? 0) >= expected.size) break;
    }
    const { rows } = await pool.query<{ id: string; name: string; version: number }>(
      'SELECT id, name, version FROM app_changes ORDER BY at',
    );
    expect(rows.map((row) => row.id).sort()).toEqual([...expected].sort());
    for (const name of names) {
      const versions = rows.filter((row) => row.name === name).map((row) => row.version);
      expect(versions, name).toEqual([...versions].sort((a, b) => a - b));
    }

    // The console, under the route's prefix.
    const console = await fetch(`${one.origin}/api/ratchet/`, { headers: { ...bearer, accept: 'text/html' } });
    expect(await console.text()).toContain('href="/api/ratchet/console/operations/interactions/next-');
    expect((await fetch(`${one.origin}/api/ratchet/operations`)).status).toBe(401);
  });
});
