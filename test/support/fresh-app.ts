/**
 * An empty app in a temporary folder outside the repository, with packages
 * installed the way a user installs them: `npm install` of the packed
 * tarballs (and whatever else the app needs, from the registry or npm's cache).
 */
import { execFile } from 'node:child_process';
import { cpSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

export const run = promisify(execFile);

export interface FreshApp {
  dir: string;
  /** Runs a command in the app's folder; rejects on a non-zero exit, with its output. */
  exec(file: string, args: string[], env?: Record<string, string>): Promise<{ stdout: string; stderr: string }>;
  write(file: string, content: string): void;
  /** Copies a file or folder of the repository into the app. */
  copy(from: string, to: string): void;
  /** The packages under node_modules (a scoped package counts once per package) and their size on disk. */
  installed(): { packages: string[]; kilobytes: number };
  remove(): void;
}

export async function freshApp(name: string, install: string[], manifest: Record<string, unknown> = { type: 'module' }): Promise<FreshApp> {
  const dir = mkdtempSync(join(tmpdir(), `ratchet-app-${name}-`));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version: '0.0.0', private: true, ...manifest }, null, 2));
  const app: FreshApp = {
    dir,
    exec: async (file, args, env = {}) => {
      try {
        return await run(file, args, { cwd: dir, env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024 });
      } catch (error) {
        const { stdout, stderr } = error as { stdout?: string; stderr?: string };
        throw new Error(`${file} ${args.join(' ')} failed in ${dir}:\n${stdout ?? ''}\n${stderr ?? ''}`);
      }
    },
    write: (file, content) => writeFileSync(join(dir, file), content),
    copy: (from, to) => cpSync(from, join(dir, to), { recursive: true }),
    installed: () => {
      const packages: string[] = [];
      const visit = (modules: string) => {
        for (const entry of safeList(modules)) {
          if (entry.startsWith('.')) continue;
          if (entry.startsWith('@')) {
            for (const scoped of safeList(join(modules, entry))) visitPackage(join(modules, entry, scoped), `${entry}/${scoped}`);
          } else visitPackage(join(modules, entry), entry);
        }
      };
      const visitPackage = (path: string, pkg: string) => {
        packages.push(pkg);
        visit(join(path, 'node_modules'));
      };
      visit(join(dir, 'node_modules'));
      return { packages: packages.sort(), kilobytes: diskKilobytes(join(dir, 'node_modules')) };
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
  if (install.length > 0) await app.exec('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error', ...install]);
  return app;
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

/** What `du -sk` says: the blocks the files take on disk. */
function diskKilobytes(path: string): number {
  const stat = lstatSync(path);
  if (!stat.isDirectory()) return (stat.blocks * 512) / 1024;
  return safeList(path).reduce((sum, entry) => sum + diskKilobytes(join(path, entry)), (stat.blocks * 512) / 1024);
}

/** `name@version` as this repository's lockfile has it: what the tests run against, and what npm's cache holds. */
export function locked(name: string): string {
  const lock = JSON.parse(readFileSync(join(import.meta.dirname, '..', '..', 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { version: string }>;
  };
  const entry = lock.packages[`node_modules/${name}`];
  if (!entry) throw new Error(`${name} is not in package-lock.json`);
  return `${name}@${entry.version}`;
}
