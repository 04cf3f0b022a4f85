import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { mismatch } from '../../local/ensure-dependencies.mjs';

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const lock = {
  packages: {
    '': { dependencies: { left: '^1.0.0' }, devDependencies: { right: '^2.0.0' } },
    'node_modules/left': { version: '1.2.0' },
    'node_modules/right': { version: '2.0.1' },
    'node_modules/right/node_modules/nested': { version: '3.0.0' },
    'node_modules/@esbuild/darwin-arm64': { version: '0.1.0', optional: true },
  },
};

/** A project whose node_modules holds `installed` (npm's hidden lockfile plus a package.json per package). */
function project(installed: Record<string, { version: string }> | undefined): string {
  const dir = mkdtempSync(join(tmpdir(), 'ratchet-deps-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'package-lock.json'), JSON.stringify(lock));
  if (!installed) return dir;
  mkdirSync(join(dir, 'node_modules'));
  writeFileSync(join(dir, 'node_modules', '.package-lock.json'), JSON.stringify({ packages: installed }));
  for (const path of Object.keys(installed)) {
    mkdirSync(join(dir, path), { recursive: true });
    writeFileSync(join(dir, path, 'package.json'), '{}');
  }
  return dir;
}

const { '': _root, 'node_modules/@esbuild/darwin-arm64': _optional, ...required } = lock.packages;

describe('the dependency check before npm start and npm test', () => {
  it('passes when node_modules holds what the lockfile says (optional platform builds may be absent)', () => {
    expect(mismatch(project(required))).toBeUndefined();
  });

  it('names what is missing or different', () => {
    expect(mismatch(project(undefined))).toBe('node_modules is missing');
    const { 'node_modules/right/node_modules/nested': _nested, ...withoutNested } = required;
    expect(mismatch(project(withoutNested))).toBe('right/node_modules/nested is not installed');
    expect(mismatch(project({ ...required, 'node_modules/left': { version: '1.1.0' } }))).toBe('left is 1.1.0, the lockfile says 1.2.0');
  });

  it('notices a package folder deleted by hand, which the hidden lockfile still lists', () => {
    const dir = project(required);
    rmSync(join(dir, 'node_modules', 'right'), { recursive: true });
    expect(mismatch(dir)).toBe('right is not installed');
  });

  it('agrees with this checkout, which npm has just installed', () => {
    expect(mismatch(join(import.meta.dirname, '..', '..'))).toBeUndefined();
  });
});
