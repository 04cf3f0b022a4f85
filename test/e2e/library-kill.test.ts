/**
 * An application's own write in `onChange`, on PostgreSQL, across `kill -9`:
 * the app (test/support/library-worker.ts) ticks in a loop, each change's row
 * inserted through `sql` in the delivery's transaction and a pause inside it;
 * it is killed three times while deliveries flow and started again. In the end one
 * row per change: none lost, none twice.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { createRatchet } from '../../local/library.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { collectOutput } from '../support/output.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';
import { eventually } from '../support/receiver.ts';

const url = inject('postgresUrl');
const secret = newSecret();
const schema = `lib_kill_${Date.now().toString(36)}`;
const table = `${schema}_rows`;
const pool = new pg.Pool({ connectionString: url });
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  await pool.end();
});

function startWorker(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'test/support/library-worker.ts'), table], {
    cwd: PROJECT_ROOT,
    env: {
      PATH: process.env.PATH,
      DATABASE_URL: url,
      DATABASE_SCHEMA: schema,
      WEBHOOK_SIGNING_SECRETS: secret,
      POWERTOOLS_LOG_LEVEL: 'CRITICAL',
      EFFECTS_RETRY_BASE_MS: '50',
      EFFECTS_RETRY_MAX_MS: '100',
      // A killed worker's claims are taken again after this (60 s by default).
      EFFECTS_LEASE_SECONDS: '1',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const output = collectOutput(child);
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', () => {
      if (output().includes('worker ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`worker exited ${code}: ${output().slice(-500)}`)));
  });
}

async function killHard(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

const count = async (text: string) => Number((await pool.query<{ n: string }>(text)).rows[0]?.n ?? 0);

describe('onChange writing in the delivery transaction', () => {
  it('leaves exactly one row per change across kill -9', async () => {
    await pool.query(`CREATE TABLE ${table} (id text NOT NULL)`);
    // The front: webhooks in through the library on the same schema (its own onChange never runs: it never ticks).
    const front = createRatchet({
      databaseUrl: url,
      schema,
      webhookSigningSecrets: secret,
      onChange: () => {
        throw new Error('the front does not deliver');
      },
      env: { POWERTOOLS_LOG_LEVEL: 'CRITICAL' },
    });
    await front.ready();
    let worker = await startWorker();
    const names = Array.from({ length: 60 }, (_, i) => `batches/kill-${i}`);
    let sent = 0;
    const sending = (async () => {
      for (const name of names) {
        const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: name }));
        const answer = await front.fetch(new Request('http://127.0.0.1/webhooks/gemini', { method: 'POST', headers, body }));
        expect(answer.status).toBe(200);
        sent++;
        await new Promise((resolve) => setTimeout(resolve, 15));
      }
    })();
    for (const atLeast of [8, 20, 35]) {
      await eventually(async () => (await count(`SELECT count(*) AS n FROM ${table}`)) >= atLeast, 20_000, `${atLeast} rows`);
      await killHard(worker);
      worker = await startWorker();
    }
    await sending;
    expect(sent).toBe(names.length);
    await eventually(async () => (await count(`SELECT count(DISTINCT id) AS n FROM ${table}`)) === names.length, 30_000, 'every change');
    expect(await count(`SELECT count(*) AS n FROM ${table}`)).toBe(names.length);
    await killHard(worker);
    await front.close();
  }, 90_000);
});
