import { describe, expect, it } from 'vitest';
import { DEFAULT_HOLD_SECONDS, KeyHolds } from '../../providers/paced-keys.ts';

describe('KeyHolds', () => {
  it('holds a key for its Retry-After in whole seconds up, the default when none was said, each key alone', () => {
    let now = 1_000_000;
    const holds = new KeyHolds(() => now);
    expect(holds.heldFor('openai#a')).toBe(0);
    holds.hold('openai#a', 30);
    holds.hold('gemini#b');
    expect(holds.heldFor('openai#a')).toBe(30);
    expect(holds.heldFor('gemini#b')).toBe(DEFAULT_HOLD_SECONDS);
    expect(holds.heldFor('openai#b')).toBe(0);
    now += 29_500;
    expect(holds.heldFor('openai#a')).toBe(1);
    expect(holds.heldFor('gemini#b')).toBe(0);
    now += 500;
    expect(holds.heldFor('openai#a')).toBe(0);
    // A later 429 holds it again, from then.
    holds.hold('openai#a', 0.2);
    expect(holds.heldFor('openai#a')).toBe(1);
  });
});
