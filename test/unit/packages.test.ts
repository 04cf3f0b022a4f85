/**
 * The packages' manifests (packages/<name>/package.json) against the
 * repository's own: what they depend on is what the repository is tested and
 * locked with, and each says what a registry needs of it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { manifestOf, PACKAGES } from '../../packages/build.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const root = JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};
const tested = { ...root.devDependencies, ...root.dependencies };

describe.each(Object.keys(PACKAGES))('packages/%s', (name) => {
  const manifest = manifestOf(name) as ReturnType<typeof manifestOf> & Record<string, unknown>;

  it('depends on exactly the ranges this repository is tested with', () => {
    const ranges = { ...(manifest.dependencies ?? {}), ...(manifest.peerDependencies ?? {}) };
    const differing = Object.entries(ranges).filter(([dep, range]) => tested[dep] !== range);
    expect(differing.map(([dep, range]) => `${dep}: ${range}, the repository has ${tested[dep] ?? 'none'}`)).toEqual([]);
  });

  it('is publishable: a scoped name, no private, a licence, engines, a files list, ESM, and a README', () => {
    expect(manifest.name).toBe(`@ratchet/${name}`);
    expect(manifest.private).toBeUndefined();
    expect(manifest.license).toBe('MIT');
    expect(manifest.type).toBe('module');
    expect(manifest.engines).toEqual({ node: '>=20.19' });
    expect(manifest.files).toEqual(expect.arrayContaining(['dist']));
    expect(existsSync(join(PROJECT_ROOT, 'packages', name, 'README.md'))).toBe(true);
  });

  it('exports each entry point it builds, with its types', () => {
    const spec = PACKAGES[name] as (typeof PACKAGES)[string];
    const exports = (manifest.exports ?? {}) as Record<string, { types?: string; default?: string }>;
    if (manifest.bin) return expect(Object.keys(exports)).toEqual(['./package.json']);
    for (const entry of Object.keys(spec.entries)) {
      const subpath = entry === 'index' ? '.' : `./${entry}`;
      expect(exports[subpath]).toEqual({ types: `./dist/${entry}.d.ts`, default: `./dist/${entry}.js` });
    }
  });
});
