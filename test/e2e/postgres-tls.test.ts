/**
 * Ratchet on a PostgreSQL that serves TLS, as a managed database does: a
 * server certificate signed by a CA the test makes. `sslmode=require` and
 * `verify-full` with `sslrootcert=` that CA connect (every connection of
 * Ratchet's encrypted, as the server sees it) and take a webhook; a wrong CA,
 * or none, is refused at start in one line that says what to give (exit 2).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { startPostgres, type TestPostgres } from '../support/postgres.ts';
import { PROJECT_ROOT, runToExit, startRatchet } from '../support/ratchet-process.ts';
import { makeCertificates } from '../support/tls.ts';

const folder = mkdtempSync(join(tmpdir(), 'ratchet-pg-tls-'));
const secret = newSecret();
let server: TestPostgres;
let admin: pg.Pool;
const ca = join(folder, 'ca.pem');
const otherCa = join(folder, 'other-ca.pem');

beforeAll(async () => {
  const certificates = makeCertificates();
  writeFileSync(ca, certificates.ca);
  writeFileSync(otherCa, certificates.otherCa);
  server = await startPostgres({ tls: certificates });
  admin = new pg.Pool({ connectionString: server.url, max: 1 });
}, 60_000);
afterAll(async () => {
  await admin?.end();
  await server?.stop();
  rmSync(folder, { recursive: true, force: true });
});

/** The TLS server's URL by host name (the certificate's), with `query`. */
const urlWith = (query: string) => `postgres://ratchet@localhost:${server.port}/postgres?${query}`;
const command = [process.execPath, '--import', 'tsx', join(PROJECT_ROOT, 'local/cli/ratchet.ts'), 'start'];

describe('ratchet start on a PostgreSQL with TLS on', () => {
  for (const mode of ['require', 'verify-full'])
    it(`connects with sslmode=${mode} and the CA's file, every connection encrypted, and takes a webhook`, async () => {
      const schema = `rt_tls_${mode.replace('-', '_')}`;
      const ratchet = await startRatchet(
        { DATABASE_URL: urlWith(`sslmode=${mode}&sslrootcert=${ca}`), DATABASE_SCHEMA: schema, WEBHOOK_SIGNING_SECRETS: secret },
        { command },
      );
      try {
        const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: `batches/tls-${mode}` }));
        const answer = await fetch(`${ratchet.url}/webhooks/gemini`, { method: 'POST', body, headers });
        expect(answer.status).toBe(200);
        expect(await answer.json()).toMatchObject({ applied: true });
        const [seen] = (
          await admin.query<{ all: number; encrypted: number }>(
            `SELECT count(*)::int AS all, count(*) FILTER (WHERE s.ssl)::int AS encrypted
             FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name LIKE 'ratchet%'`,
          )
        ).rows;
        expect(seen?.all).toBeGreaterThan(0);
        expect(seen?.encrypted).toBe(seen?.all);
        expect(ratchet.output()).not.toMatch(/SECURITY WARNING|\n\s+at /);
      } finally {
        await ratchet.stop();
      }
    });

  for (const [what, query] of [
    ['a wrong CA', `sslmode=verify-full&sslrootcert=${otherCa}`],
    ['no CA (the system’s do not know it)', 'sslmode=require'],
  ])
    it(`refuses ${what} in one line that says to give the CA's file (exit 2)`, async () => {
      const result = await runToExit(command, {
        PATH: process.env.PATH ?? '',
        HOME: folder,
        PORT: '0',
        POWERTOOLS_LOG_LEVEL: 'ERROR',
        DATABASE_URL: urlWith(query as string),
        WEBHOOK_SIGNING_SECRETS: secret,
        RATCHET_API_TOKEN: 'a-test-token-of-enough-length-0123456789',
      });
      expect(result.code).toBe(2);
      const lines = result.output.trim().split('\n');
      expect(lines, result.output).toHaveLength(1);
      expect(lines[0]).toMatch(
        /DATABASE_URL: the server's TLS certificate is not trusted \(.+\): give its CA with sslrootcert=\/path\/to\/ca\.pem/,
      );
      expect(result.output).not.toContain('ratchet@');
    });
});
