/**
 * Each tarball as a registry would serve it, checked by the two tools package
 * authors use: @arethetypeswrong/cli (does every entry point resolve, with
 * types, under node16, bundler and node10 resolution) and publint (exports,
 * files, bin, engines).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { run } from '../support/fresh-app.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const tarballs = inject('tarballs');
const bin = (name: string) => join(PROJECT_ROOT, 'node_modules', '.bin', name);

describe.each(Object.keys(tarballs))('the %s tarball', (pkg) => {
  const tarball = tarballs[pkg] as string;

  // ESM only, by decision (docs/apps.md): CommonJS callers use require(esm) (Node >= 20.19), which attw does not model.
  it('has no problem @arethetypeswrong/cli reports (profile esm-only)', async () => {
    // attw exits non-zero on any problem its profile does not ignore.
    const { stdout } = await run(bin('attw'), ['--profile', 'esm-only', '--format', 'json', tarball]).catch((error: { stdout: string }) => {
      throw new Error(`attw: ${error.stdout}`);
    });
    const report = JSON.parse(stdout) as { problems?: Record<string, Array<{ kind: string; resolutionKind: string }>> };
    // The JSON lists the ignored ones too: only require() from CommonJS (node16-cjs) may be among them.
    const problems = Object.values(report.problems ?? {}).flat();
    expect(problems.filter((p) => !(p.kind === 'CJSResolvesToESM' && p.resolutionKind === 'node16-cjs'))).toEqual([]);
  });

  it('has no error or warning publint reports', async () => {
    const dir = mkdtempSync(join(tmpdir(), `ratchet-publint-${pkg}-`));
    try {
      await run('tar', ['-xzf', tarball, '-C', dir]);
      const { stdout, stderr } = await run(bin('publint'), ['--strict', '--pack', 'false', join(dir, 'package')]).catch(
        (error: { stdout: string; stderr: string }) => {
          throw new Error(`publint: ${error.stdout}${error.stderr}`);
        },
      );
      expect(`${stdout}${stderr}`).toContain('All good!');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
