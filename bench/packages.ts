/**
 * The packages (`BENCH_SECTIONS=packages`): each tarball installed alone into
 * an empty app (packages, KB on disk), and the server's time to its ready
 * line, installed (`npx ratchet start`) beside this checkout's `npm start`
 * path (`node --import tsx local/start.ts`). Also the build choice it rests
 * on: the same server compiled file by file with tsc, started the same way.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPackages, packPackages } from '../packages/build.ts';
import { freshApp } from '../test/support/fresh-app.ts';
import { run } from './cold-start.ts';
import { percentile } from './mixes.ts';
import { startProcess, stopProcess } from './processes.ts';

const READY = /Ratchet ready at (http:\/\/\S+) /;

export async function benchPackages(root: string, runs: number): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-packages-'));
  const apps: Array<{ remove(): void }> = [];
  try {
    const tarballs = packPackages(await buildPackages(), join(work, 'tarballs'));
    console.log('\n## Packages, each installed alone into an empty app\n\n| package | packages installed | KB on disk |\n|---|---:|---:|');
    let serverDir = '';
    for (const [name, tarball] of Object.entries(tarballs)) {
      const app = await freshApp(`bench-${name}`, [tarball], {});
      apps.push(app);
      const { packages, kilobytes } = app.installed();
      console.log(`| @ratchet/${name} | ${packages.length} | ${Math.round(kilobytes)} |`);
      if (name === 'server') serverDir = app.dir;
    }

    // tsc's per-file output of the same entry, for the build choice (packages/build.ts).
    const tscOut = join(root, 'dist', 'bench-tsc');
    rmSync(tscOut, { recursive: true, force: true });
    await run(process.execPath, [
      join(root, 'node_modules/typescript/bin/tsc'),
      ...['--outDir', tscOut, '--rootDir', root, '--rewriteRelativeImportExtensions', '--sourceMap', '--strict', '--skipLibCheck'],
      ...['--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--types', 'node', '--verbatimModuleSyntax'],
      join(root, 'local/cli/ratchet.ts'),
      // Forked by path, so imported by nothing: named as a root of its own, as packages/build.ts names it an entry.
      join(root, 'engines/sqlite/derived-process.ts'),
    ]).catch(() => undefined); // type errors do not stop the emit; the typecheck is npm run check's
    const ready = async (command: string[], cwd: string) => {
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        const dataDir = join(work, `data-${Math.random().toString(36).slice(2)}`);
        const once = await startProcess(command, { PORT: '0', DATA_DIR: dataDir }, READY, cwd);
        times.push(once.readyMs);
        await stopProcess(once);
        rmSync(dataDir, { recursive: true, force: true });
      }
      return percentile(times, 0.5);
    };
    const installed = await ready(['npx', '--no-install', 'ratchet', 'start'], serverDir);
    const bundleOnly = await ready([process.execPath, 'node_modules/@ratchet/server/dist/ratchet.js', 'start'], serverDir);
    const tsc = await ready([process.execPath, join(tscOut, 'local/cli/ratchet.js'), 'start'], root);
    const checkout = await ready([process.execPath, '--import', 'tsx', 'local/start.ts'], root);
    const npmStart = await ready(['npm', 'start'], root);
    console.log(
      `\nReady line, median of ${runs} (a new data folder each):\n\n| how | ms | × checkout |\n|---|---:|---:|\n` +
        [
          ['`npx ratchet start`, installed from the tarball', installed],
          ['`node …/@ratchet/server/dist/ratchet.js start` (the same, without npx)', bundleOnly],
          ['the server compiled by tsc, file by file (the alternative to esbuild)', tsc],
          ['`node --import tsx local/start.ts` in this checkout', checkout],
          ['`npm start` in this checkout (npm, like npx, costs its own start)', npmStart],
        ]
          .map(([how, ms]) => `| ${how} | ${(ms as number).toFixed(0)} | ${((ms as number) / checkout).toFixed(2)} |`)
          .join('\n'),
    );
    rmSync(tscOut, { recursive: true, force: true });
  } finally {
    for (const app of apps) app.remove();
    rmSync(work, { recursive: true, force: true });
  }
}
