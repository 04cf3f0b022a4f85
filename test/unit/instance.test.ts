/**
 * The instance's lifecycle (app/instance.ts) on a stand-in engine: when each
 * kind of engine is started, the hourly chores at most once an hour and only
 * where claimed, a tick's round, and close. The front ends' own tests
 * (library.test.ts, sqlite-runtime.test.ts, the PostgreSQL ones) run it on
 * the real engines.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Engine } from '../../app/engine.ts';
import { openInstance } from '../../app/instance.ts';
import { silentLogger } from '../support/silent-logger.ts';

function standIn(starts: Engine['starts'], claimJob?: Engine['claimJob']) {
  const calls: string[] = [];
  const engine = {
    starts,
    start: async () => void calls.push('start'),
    close: async (failed: boolean) => void calls.push(`close${failed ? ' failed' : ''}`),
    maintenance: [() => calls.push('chore')],
    drainEffects: async (budgetMs: number) => {
      calls.push(`drain ${budgetMs > 0 ? 'some' : 'none'}`);
      return 2;
    },
    ...(claimJob && { claimJob }),
  } as unknown as Engine;
  return { engine, calls };
}

const open = (engine: Engine) => openInstance(engine, { credentialLabels: [] }, { logger: silentLogger });

describe('the instance', () => {
  afterEach(() => vi.useRealTimers());

  it('starts an engine whose work runs from open at once, and one that runs where resident only with start()', async () => {
    const onOpen = standIn('on-open');
    const first = await open(onOpen.engine);
    expect(onOpen.calls).toEqual(['start']);
    await first.start();
    expect(onOpen.calls.filter((call) => call === 'start')).toHaveLength(1);

    const resident = standIn('when-resident');
    const second = await open(resident.engine);
    await second.tick(1000);
    expect(resident.calls).not.toContain('start');
    await second.start();
    await second.start();
    expect(resident.calls.filter((call) => call === 'start')).toHaveLength(1);
    await Promise.all([first.close(), second.close()]);
  });

  it('runs the hourly chores at most once an hour in this process, and only when it claims them', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    let held = false;
    const claims: number[] = [];
    const { engine, calls } = standIn('when-resident', async (_job, forMs) => {
      claims.push(forMs);
      return !held;
    });
    const instance = await open(engine);
    expect((await instance.tick(1000)).maintenance).toBe(true);
    expect((await instance.tick(1000)).maintenance).toBe(false); // this hour's already
    vi.setSystemTime(Date.now() + 55 * 60_000);
    held = true; // another instance claimed it
    expect((await instance.tick(1000)).maintenance).toBe(false);
    vi.setSystemTime(Date.now() + 55 * 60_000);
    held = false;
    expect((await instance.tick(1000)).maintenance).toBe(true);
    expect(calls.filter((call) => call === 'chore')).toHaveLength(2);
    // Claimed 5 minutes short of the hour, so an hourly timer's next round is not refused by its own last claim.
    expect(new Set(claims)).toEqual(new Set([55 * 60_000]));
    await instance.close();
  });

  it('asks again next time when the claim could not be asked (the database away)', async () => {
    let away = true;
    const { engine, calls } = standIn('when-resident', async () => {
      if (away) throw new Error('connection refused');
      return true;
    });
    const instance = await open(engine);
    expect((await instance.tick(1000)).maintenance).toBe(false);
    away = false;
    expect((await instance.tick(1000)).maintenance).toBe(true);
    expect(calls.filter((call) => call === 'chore')).toHaveLength(1);
    await instance.close();
  });

  it('ticks the effects within the budget, reconcile off without credentials, and closes once (as failed when told)', async () => {
    const { engine, calls } = standIn('when-resident');
    const instance = await open(engine);
    const round = await instance.tick(1000);
    expect(round).toMatchObject({ effects: 2 });
    expect(round.reconcile).toBeUndefined();
    expect(instance.reconciles).toBe(false);
    await instance.close(true);
    await instance.close();
    expect(calls.filter((call) => call.startsWith('close'))).toEqual(['close failed']);
  });

  it('closes the engine as failed when reconcile cannot be set up', async () => {
    const { engine, calls } = standIn('on-open');
    const broken = openInstance(
      engine,
      {
        credentialLabels: [],
        reconcile: {
          intervalSeconds: 60,
          unseenExpiryMs: 1,
          overdueAfter: { batch: null, video: null, interaction: null } as never,
          webhookUrl: undefined,
          poller: async () => {
            throw new Error('the Gemini API keys are not label=key pairs');
          },
        },
      },
      { logger: silentLogger },
    );
    await expect(broken).rejects.toThrow('label=key');
    expect(calls).toEqual(['start', 'close failed']);
  });
});
