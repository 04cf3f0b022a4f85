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
const tested: Record<string, string> = { ...root.devDependencies, ...root.dependencies };
/**
 * Peers wider than the repository's own range, each major proven by installing the packed tarball beside it
 * (test/packages/genai-majors.test.ts): apps on either SDK install @ratchet/genai without a conflict.
 */
const widerPeers: Record<string, string> = {
  '@google/genai': '^2.32.0 || ^3.0.0',
  // test/packages/provider-majors.test.ts: each end of these ranges.
  openai: '^5.0.0 || ^6.0.0',
  '@anthropic-ai/sdk': '>=0.39.0 <2',
};

describe.each(Object.keys(PACKAGES))('packages/%s', (name) => {
  const manifest = manifestOf(name) as ReturnType<typeof manifestOf> & Record<string, unknown>;

  it('depends on exactly the ranges this repository is tested with', () => {
    const expected = (dep: string, peer: boolean) => (peer ? widerPeers[dep] : undefined) ?? tested[dep];
    const ranges = [
      ...Object.entries(manifest.dependencies ?? {}).map(([dep, range]) => ({ dep, range, peer: false })),
      ...Object.entries(manifest.peerDependencies ?? {}).map(([dep, range]) => ({ dep, range, peer: true })),
    ];
    const differing = ranges.filter(({ dep, range, peer }) => expected(dep, peer) !== range);
    expect(differing.map(({ dep, range, peer }) => `${dep}: ${range}, the repository has ${expected(dep, peer) ?? 'none'}`)).toEqual([]);
  });

  it('is publishable: a scoped name, no private, a licence, engines, a files list, ESM, and a README', () => {
    expect(manifest.name).toBe(`@ratchet/${name}`);
    expect(manifest.private).toBeUndefined();
    expect(manifest.license).toBe('MIT');
    expect(manifest.type).toBe('module');
    expect(manifest.engines).toEqual({ node: '>=22.12' });
    expect(manifest.files).toEqual(expect.arrayContaining(['dist']));
    expect(existsSync(join(PROJECT_ROOT, 'packages', name, 'README.md'))).toBe(true);
  });

  it('exports each entry point it builds, with its types, and names each program it builds as a bin', () => {
    const spec = PACKAGES[name] as (typeof PACKAGES)[string];
    const exports = (manifest.exports ?? {}) as Record<string, { types?: string; default?: string }>;
    const bins = (manifest.bin ?? {}) as Record<string, string>;
    for (const program of Object.keys(spec.programs ?? {})) expect(bins[program]).toBe(`dist/${program}.js`);
    if (!spec.types) return expect(Object.keys(exports)).toEqual(['./package.json']);
    for (const entry of Object.keys(spec.entries)) {
      const subpath = entry === 'index' ? '.' : `./${entry}`;
      expect(exports[subpath]).toEqual({ types: `./dist/${entry}.d.ts`, default: `./dist/${entry}.js` });
    }
  });
});
