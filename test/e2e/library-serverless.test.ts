/**
 * The library where nothing stays up: a process that answered a webhook
 * through `ratchet.fetch` and ran a `tick`, without `start()` and without
 * `close()`, ends on its own (no timer, no connection in use, no LISTEN left
 * behind), as a serverless function's process must be free to.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';
import { collectOutput } from '../support/output.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

describe('createRatchet without start()', () => {
  it('leaves nothing running after a webhook and a tick: the process ends by itself', async () => {
    const secret = newSecret();
    const delivery = signedDelivery(secret, envelope('batch.succeeded', { id: 'batches/serverless-1' }));
    const child = spawn(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'test/support/library-once.ts')], {
      cwd: PROJECT_ROOT,
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: inject('postgresUrl'),
        DATABASE_SCHEMA: `lib_once_${Date.now().toString(36)}`,
        WEBHOOK_SIGNING_SECRETS: secret,
        POWERTOOLS_LOG_LEVEL: 'ERROR',
        DELIVERY: JSON.stringify(delivery),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = collectOutput(child);
    const ended = await Promise.race([
      new Promise<number | null>((resolve) => child.once('exit', resolve)),
      new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 15_000)),
    ]);
    if (ended === 'still running') child.kill('SIGKILL');
    expect(ended, output()).toBe(0);
    expect(JSON.parse(output().trim().split('\n').at(-1) as string)).toEqual({ status: 200, effects: 1 });
  });
});
