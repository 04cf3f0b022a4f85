/**
 * "Never a password": a DATABASE_URL that carries one, on a server that asks
 * for it (scram-sha-256 for this role), through everything a user sees of a
 * `ratchet start` process: its start, `/healthz` (serving, and 503 while the
 * database is down), the console, `/metrics`, an OpenTelemetry export
 * (traces and metrics over OTLP), the effect it delivers, every line it
 * writes to stdout and stderr, and two refused starts (a database that does
 * not exist, a wrong password). The password, raw or percent-encoded, is in
 * none of it. A cluster of this file's own, whose pg_hba.conf it changes.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { Collector } from '../support/otlp-collector.ts';
import { startPostgres, type TestPostgres } from '../support/postgres.ts';
import { type RatchetProcess, runToExit, startRatchet, TEST_API_TOKEN } from '../support/ratchet-process.ts';
import { eventually, Receiver } from '../support/receiver.ts';

const ROLE = 'ratchet_with_password';
/** A core no other text holds, in a password with the characters a URL must encode. */
const CORE = randomBytes(8).toString('hex');
const PASSWORD = `Pa:ss@w/rd%${CORE}?#`;
const inbound = newSecret();
const outbound = newSecret();
let server: TestPostgres;
let receiver: Receiver;
let collector: Collector;
let ratchet: RatchetProcess | undefined;
/** Everything Ratchet said, to be searched for the password at the end. */
const seen: string[] = [];

const urlOf = (password: string, database = 'postgres') =>
  `postgres://${ROLE}:${encodeURIComponent(password)}@127.0.0.1:${server.port}/${database}`;
const env = (url: string) => ({
  DATABASE_URL: url,
  DATABASE_SCHEMA: 'with_password',
  WEBHOOK_SIGNING_SECRETS: inbound,
  EFFECTS_WEBHOOK_URL: receiver.url,
  EFFECTS_SIGNING_SECRET: outbound,
  POWERTOOLS_LOG_LEVEL: 'DEBUG',
  OTEL_EXPORTER_OTLP_ENDPOINT: collector.url,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_METRIC_EXPORT_INTERVAL: '300',
  OTEL_BSP_SCHEDULE_DELAY: '100',
});

/** An answer of Ratchet's, its status and text kept for the search. */
async function asked(path: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const answer = await fetch(`${(ratchet as RatchetProcess).url}${path}`, init);
  const text = await answer.text();
  seen.push(`${path} ${answer.status} ${JSON.stringify([...answer.headers])} ${text}`);
  return { status: answer.status, text };
}
const withToken = { headers: { authorization: `Bearer ${TEST_API_TOKEN}` } };

beforeAll(async () => {
  server = await startPostgres();
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  try {
    await admin.query(`CREATE ROLE ${ROLE} LOGIN PASSWORD '${PASSWORD.replace(/'/g, "''")}'`);
    await admin.query(`GRANT CREATE ON DATABASE postgres TO ${ROLE}`);
    // This role, over TCP, must give its password (every other role keeps the cluster's trust).
    const hba = join(server.dataDir as string, 'pg_hba.conf');
    writeFileSync(hba, `host all ${ROLE} 127.0.0.1/32 scram-sha-256\n${readFileSync(hba, 'utf8')}`);
    await admin.query('SELECT pg_reload_conf()');
  } finally {
    await admin.end();
  }
  receiver = await new Receiver(outbound).start();
  collector = await new Collector().start();
});

afterAll(async () => {
  await ratchet?.stop();
  await receiver?.stop();
  await collector?.stop();
  await server?.stop();
});

describe.skipIf(Boolean(process.env.RATCHET_TEST_DATABASE_URL))('a DATABASE_URL with a password', () => {
  it('is a password the server asks for: a wrong one is refused', async () => {
    const wrong = new pg.Client({ connectionString: urlOf('not-it') });
    await expect(wrong.connect()).rejects.toMatchObject({ code: '28P01' });
    const right = new pg.Client({ connectionString: urlOf(PASSWORD) });
    await right.connect();
    await right.end();
  });

  it('shows in nothing ratchet start says: start, /healthz up and down, the console, /metrics, OTLP, an effect, its logs', async () => {
    ratchet = await startRatchet(env(urlOf(PASSWORD)));
    expect(await asked('/healthz')).toMatchObject({ status: 200 });

    const name = 'batches/with-password';
    const { body, headers } = signedDelivery(inbound, envelope('batch.succeeded', { id: name }));
    expect(await asked('/webhooks/gemini', { method: 'POST', body, headers })).toMatchObject({ status: 200 });
    await eventually(() => receiver.applied().some((d) => d.body.data.name === name), 20_000, 'the effect delivered');
    await eventually(
      () => collector.spans().some((span) => span.name === 'ratchet.effect') && collector.metricNames().size > 0,
      20_000,
      'the trace and the metrics exported',
    );
    const page = await asked('/', withToken);
    expect(page.text).toContain(`127.0.0.1:${server.port}/postgres`); // the console names the database …
    expect(page.text).toContain(name);
    expect((await asked('/metrics', withToken)).text).toMatch(/ratchet_/);
    expect((await asked(`/operations/${name}`, withToken)).status).toBe(200);

    // The database down: /healthz and a write say so, each with its reason.
    await server.halt('fast');
    await eventually(async () => (await asked('/healthz')).status === 503, 20_000, '/healthz answering 503');
    const refused = signedDelivery(inbound, envelope('batch.failed', { id: 'batches/while-down' }));
    expect((await asked('/webhooks/gemini', { method: 'POST', body: refused.body, headers: refused.headers })).status).toBe(503);
    await server.resume();
    await eventually(async () => (await asked('/healthz')).status === 200, 30_000, '/healthz serving again');
    await ratchet.stop();
    seen.push(ratchet.output());
    expect(ratchet.output()).toMatch(/database/i);
  });

  it('shows in neither refused start: a database that does not exist, a wrong password', async () => {
    for (const [url, said] of [
      [urlOf(PASSWORD, 'no_such_database'), /no_such_database/],
      [urlOf(`${PASSWORD}-wrong`), /password/],
    ] as const) {
      const run = await runToExit(['npm', 'start'], { ...process.env, ...env(url), PORT: '0', RATCHET_API_TOKEN: TEST_API_TOKEN });
      expect(run.code, run.output).not.toBe(0);
      expect(run.output).toMatch(said);
      seen.push(run.output);
    }
  });

  it('is nowhere in any of it, raw or percent-encoded', () => {
    const exported = collector.exports.map((one) => `${one.path} ${one.body.toString()}`);
    const delivered = receiver.accepted.map((d) => JSON.stringify(d));
    const all = [...seen, ...exported, ...delivered].join('\n');
    expect(seen.length).toBeGreaterThan(10);
    expect(exported.length).toBeGreaterThan(0);
    for (const form of [PASSWORD, encodeURIComponent(PASSWORD), CORE]) expect(all).not.toContain(form);
  });
});
