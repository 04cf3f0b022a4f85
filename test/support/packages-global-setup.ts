/**
 * The packages project's setup: builds and packs every package once
 * (packages/build.ts), into a folder outside the repository, for the tests
 * that install the tarballs into fresh apps.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildPackages, packPackages } from '../../packages/build.ts';

export default async function setup(project: TestProject) {
  const out = mkdtempSync(join(tmpdir(), 'ratchet-tarballs-'));
  const tarballs = packPackages(await buildPackages(), out);
  project.provide('tarballs', tarballs);
  return () => rmSync(out, { recursive: true, force: true });
}

declare module 'vitest' {
  export interface ProvidedContext {
    /** Package name (client, genai, cdk, server) → its packed tarball. */
    tarballs: Record<string, string>;
  }
}
