/**
 * A newcomer's first hour on PostgreSQL, as processes: `ratchet start` from an
 * empty folder (no data folder yet: it makes the one it needs, owner-only, and
 * a webhook signed with its printed development secret is taken), each
 * database mistake in one line naming the cause and the setting to change
 * (exit 2: a server without TLS asked for it, a schema holding another app's
 * tables, a role lacking a privilege with the GRANT that gives it), never a
 * stack trace or node-pg's own warning, and `npm run migrate` in the checkout.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { envelope, signedDelivery } from '../support/deliveries.ts';
import { PROJECT_ROOT, runToExit, startRatchet } from '../support/ratchet-process.ts';

const url = inject('postgresUrl');
const suffix = Date.now().toString(36);
const folder = mkdtempSync(join(tmpdir(), 'ratchet-pg-first-'));
let admin: pg.Pool;

beforeAll(() => {
  admin = new pg.Pool({ connectionString: url, max: 2 });
});
afterAll(async () => {
  await admin?.end();
  rmSync(folder, { recursive: true, force: true });
});

/** `url` as another role (the test server trusts loopback: no password). */
function as(role: string): string {
  const other = new URL(url);
  other.username = role;
  other.password = '';
  return other.href;
}

/** `ratchet start` from the sources, in `cwd`, run until it exits (it is expected to refuse). */
function start(env: Record<string, string>, cwd = folder) {
  return runToExit([process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'start'], {
    PATH: process.env.PATH ?? '',
    HOME: folder,
    PORT: '0',
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    ...env,
  }).then((result) => ({ ...result, cwd }));
}

function oneLine(output: string): string {
  const lines = output.trim().split('\n');
  expect(lines, output).toHaveLength(1);
  expect(output).not.toMatch(/\n\s+at |SECURITY WARNING|DeprecationWarning/);
  return lines[0] as string;
}

describe('ratchet start on PostgreSQL, the first time', () => {
  it('starts in an empty folder, makes the data folder it needs (owner-only), and takes a webhook signed with its secret', async () => {
    const empty = mkdtempSync(join(folder, 'app-'));
    const ratchet = await startRatchet(
      { DATABASE_URL: url, DATABASE_SCHEMA: `rt_fresh_${suffix}`, RATCHET_API_TOKEN: '', WEBHOOK_SIGNING_SECRETS: '' },
      // tsx by its own URL: the empty folder has no node_modules to find it in.
      {
        command: [process.execPath, '--import', import.meta.resolve('tsx'), join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'start'],
        cwd: empty,
      },
    );
    try {
      const data = join(empty, '.ratchet-data');
      expect(statSync(data).mode & 0o777).toBe(0o700);
      for (const file of ['dev-webhook-secret', 'api-token']) expect(statSync(join(data, file)).mode & 0o777).toBe(0o600);
      expect(ratchet.output()).toContain(join(data, 'dev-webhook-secret'));
      const secret = readFileSync(join(data, 'dev-webhook-secret'), 'utf8').trim();
      const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: `batches/first-${suffix}` }));
      const answer = await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers });
      expect(answer.status).toBe(200);
      expect(await answer.json()).toMatchObject({ applied: true });
    } finally {
      await ratchet.stop();
    }
  });

  it('says a TLS mismatch in one line naming DATABASE_URL, without node-pg’s warning (exit 2)', async () => {
    const tls = new URL(url);
    tls.searchParams.set('sslmode', 'require');
    const { code, output } = await start({ DATABASE_URL: tls.href, DATABASE_SCHEMA: `rt_tls_${suffix}` });
    expect(code).toBe(2);
    expect(oneLine(output)).toMatch(/^ratchet: DATABASE_URL asks for TLS .* does not offer it: remove sslmode/);
  });

  it('refuses a schema that holds another app’s tables, naming DATABASE_SCHEMA (exit 2), and changes nothing there', async () => {
    const schema = `app_${suffix}`;
    await admin.query(`CREATE SCHEMA ${schema}; CREATE TABLE ${schema}.operations (id int)`);
    const { code, output } = await start({ DATABASE_URL: url, DATABASE_SCHEMA: schema });
    expect(code).toBe(2);
    expect(oneLine(output)).toMatch(
      new RegExp(
        `^ratchet: DATABASE_SCHEMA=${schema} already holds a table named operations that is not Ratchet's: give Ratchet a schema of its own`,
      ),
    );
    const tables = await admin.query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [schema]);
    expect(tables.rows).toEqual([{ table_name: 'operations' }]);
  });

  it('names a missing privilege with the GRANT that gives it (exit 2): creating the schema, then using it', async () => {
    const role = `limited_${suffix}`;
    const schema = `rt_grants_${suffix}`;
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    await admin.query(`REVOKE CREATE ON DATABASE postgres FROM PUBLIC`).catch(() => {});
    const create = await start({ DATABASE_URL: as(role), DATABASE_SCHEMA: schema });
    expect(create.code).toBe(2);
    expect(oneLine(create.output)).toMatch(
      new RegExp(`^ratchet: DATABASE_URL: the role ${role} lacks a privilege .*GRANT CREATE ON DATABASE postgres TO ${role};`),
    );
    // The schema made by its owner (npm run migrate), the role given nothing on it: USAGE is what it lacks.
    const migrated = await runToExit(['npm', 'run', '--silent', 'migrate'], {
      ...process.env,
      DATABASE_URL: url,
      DATABASE_SCHEMA: schema,
    } as Record<string, string>);
    expect(migrated).toMatchObject({ code: 0 });
    const use = await start({ DATABASE_URL: as(role), DATABASE_SCHEMA: schema, DATABASE_MIGRATE: 'off' });
    expect(use.code).toBe(2);
    expect(oneLine(use.output)).toMatch(new RegExp(`GRANT USAGE, CREATE ON SCHEMA ${schema} TO ${role};`));
    await admin.query(`GRANT USAGE ON SCHEMA ${schema} TO ${role}`);
    const tables = await start({ DATABASE_URL: as(role), DATABASE_SCHEMA: schema, DATABASE_MIGRATE: 'off' });
    expect(tables.code).toBe(2);
    expect(oneLine(tables.output)).toMatch(
      new RegExp(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${schema} TO ${role};`),
    );
  });

  it('npm run migrate brings a schema to this version from the checkout, then finds nothing to do', async () => {
    const schema = `rt_migrate_${suffix}`;
    const env = { ...process.env, DATABASE_URL: url, DATABASE_SCHEMA: schema } as Record<string, string>;
    const first = await runToExit(['npm', 'run', '--silent', 'migrate'], env);
    expect(first.code).toBe(0);
    expect(first.output).toMatch(new RegExp(`schema ${schema} migrated from version 0 to \\d+`));
    const again = await runToExit(['npm', 'run', '--silent', 'migrate'], env);
    expect(again.output).toMatch(/already: nothing to do/);
    const help = await runToExit(['npm', 'run', '--silent', 'migrate', '--', '--help'], env);
    expect(help).toMatchObject({ code: 0 });
  });
});
