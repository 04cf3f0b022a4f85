/** The PostgreSQL engine's pool setting: DATABASE_POOL_MAX, and DATABASE_POOL_SIZE (its former name) still read. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../app/config.ts';

describe('DATABASE_POOL_MAX', () => {
  it('is 10 unless set; its former name DATABASE_POOL_SIZE is still read', () => {
    expect(loadConfig({}).DATABASE_POOL_MAX).toBe(10);
    expect(loadConfig({ DATABASE_POOL_MAX: '25' }).DATABASE_POOL_MAX).toBe(25);
    expect(loadConfig({ DATABASE_POOL_SIZE: '4' }).DATABASE_POOL_MAX).toBe(4);
    expect(loadConfig({ DATABASE_POOL_MAX: '4', DATABASE_POOL_SIZE: '4' }).DATABASE_POOL_MAX).toBe(4);
  });

  it('refuses a size out of range, and the two names disagreeing, in one line each', () => {
    expect(() => loadConfig({ DATABASE_POOL_MAX: '0' })).toThrow('DATABASE_POOL_MAX must be a whole number from 1 to 1000, not "0"');
    expect(() => loadConfig({ DATABASE_POOL_MAX: '8', DATABASE_POOL_SIZE: '4' })).toThrow(
      'DATABASE_POOL_MAX and DATABASE_POOL_SIZE (its former name) disagree: keep DATABASE_POOL_MAX',
    );
  });
});
