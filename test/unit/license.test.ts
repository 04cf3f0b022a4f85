/**
 * One licence everywhere: LICENSE decides it, and every place that names a
 * licence to a registry or a reader says the same (the repository's and each
 * package's package.json, the OpenAPI description served at /openapi.json and
 * committed in docs/, the Python client's pyproject.toml).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openApiDocument } from '../../app/http/openapi.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const read = (path: string) => readFileSync(join(PROJECT_ROOT, path), 'utf8');

/** The SPDX identifier of the licence LICENSE holds, from its title line ("MIT License"). */
function spdxOfLicenseFile(): string {
  const title = (read('LICENSE').split('\n')[0] as string).trim();
  const known: Record<string, string> = { 'MIT License': 'MIT', 'Apache License': 'Apache-2.0' };
  const spdx = known[title];
  if (!spdx) throw new Error(`LICENSE starts with ${JSON.stringify(title)}: add its SPDX identifier here`);
  return spdx;
}

describe('the licence', () => {
  const spdx = spdxOfLicenseFile();

  it('is the one LICENSE holds in every package.json (the repository and packages/*)', () => {
    const manifests = [
      'package.json',
      ...readdirSync(join(PROJECT_ROOT, 'packages'), { withFileTypes: true })
        .filter((entry) => entry.isDirectory())
        .map((entry) => `packages/${entry.name}/package.json`),
    ];
    expect(manifests.length).toBeGreaterThan(1);
    const said = Object.fromEntries(manifests.map((path) => [path, (JSON.parse(read(path)) as { license?: string }).license]));
    expect(said).toEqual(Object.fromEntries(manifests.map((path) => [path, spdx])));
  });

  it('is the one the OpenAPI description names, served and committed', () => {
    const info = { name: spdx, identifier: spdx };
    expect((openApiDocument() as { info: { license: unknown } }).info.license).toEqual(info);
    expect((JSON.parse(read('docs/openapi.json')) as { info: { license: unknown } }).info.license).toEqual(info);
  });

  it("is the one the Python client's pyproject.toml names", () => {
    // PEP 639's `license = "MIT"`, or the older table `license = { text = "MIT" }`.
    const line = read('clients/python/pyproject.toml').match(/^license\s*=\s*(.+)$/m)?.[1];
    const named = line?.match(/^"([^"]+)"$/)?.[1] ?? line?.match(/text\s*=\s*"([^"]+)"/)?.[1];
    expect(named).toBe(spdx);
  });
});
