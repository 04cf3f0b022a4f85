/** secretSetting's caching rules, with Powertools' getSecret replaced by a fake Secrets Manager (its cache modelled). */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

const stored = new Map<string, string>();
const cached = new Map<string, string>();
const fetches: Array<{ arn: string; forceFetch: boolean }> = [];
vi.mock('@aws-lambda-powertools/parameters/secrets', () => ({
  getSecret: async (arn: string, options: { forceFetch?: boolean }) => {
    const forceFetch = options.forceFetch === true;
    if (forceFetch || !cached.has(arn)) {
      fetches.push({ arn, forceFetch });
      cached.set(arn, stored.get(arn) ?? '');
    }
    return cached.get(arn);
  },
}));

const { secretSetting } = await import('../../lambda/secrets.ts');
const { loadConfig } = await import('../../app/config.ts');

let arn: string;
beforeEach(() => {
  vi.useFakeTimers({ now: new Date('2026-12-03T10:00:00Z'), toFake: ['Date'] });
  arn = `arn:aws:secretsmanager:eu-west-1:1:secret:s-${Math.random()}`;
  fetches.length = 0;
});
afterEach(() => vi.useRealTimers());

const config = () => loadConfig({ WEBHOOK_SIGNING_SECRETS_ARN: arn });
const advance = (ms: number) => vi.setSystemTime(Date.now() + ms);

describe('secretSetting', () => {
  it('prefers the variable itself and treats the placeholder and blanks as not configured', async () => {
    expect(await secretSetting(loadConfig({ WEBHOOK_SIGNING_SECRETS: ' whsec_x ' }), 'WEBHOOK_SIGNING_SECRETS')).toBe('whsec_x');
    expect(await secretSetting(loadConfig({ WEBHOOK_SIGNING_SECRETS: 'not-configured' }), 'WEBHOOK_SIGNING_SECRETS')).toBeUndefined();
    expect(await secretSetting(loadConfig({}), 'WEBHOOK_SIGNING_SECRETS')).toBeUndefined();
    expect(fetches).toEqual([]);
  });

  it('asks again past the cache every 10 s while the secret is not configured, then settles on the cache', async () => {
    stored.set(arn, 'not-configured');
    expect(await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS')).toBeUndefined();
    advance(5_000);
    expect(await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS')).toBeUndefined();
    expect(fetches).toHaveLength(1); // within 10 s: the cache answers
    stored.set(arn, 'whsec_set');
    advance(5_000);
    expect(await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS')).toBe('whsec_set');
    advance(10_000);
    expect(await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS')).toBe('whsec_set');
    expect(fetches.map((f) => f.forceFetch)).toEqual([false, true]);
  });

  it('looks past the cache on refresh at most every 30 s', async () => {
    stored.set(arn, 'whsec_old');
    await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS');
    stored.set(arn, 'whsec_new');
    expect(await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS', { refresh: true })).toBe('whsec_new');
    stored.set(arn, 'whsec_newer');
    advance(20_000);
    expect(await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS', { refresh: true })).toBe('whsec_new');
    advance(10_000);
    expect(await secretSetting(config(), 'WEBHOOK_SIGNING_SECRETS', { refresh: true })).toBe('whsec_newer');
    expect(fetches.map((f) => f.forceFetch)).toEqual([false, true, true]);
  });
});
