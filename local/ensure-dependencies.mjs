/**
 * Runs before `npm start` and `npm test` (as their `pre` scripts): when the
 * installed dependencies are missing or differ from package-lock.json, installs
 * them from the lockfile (`npm ci`) with one line saying why. Otherwise it only
 * reads two JSON files and stats the direct dependencies.
 *
 * Plain JavaScript with Node built-ins only: it must run before anything is installed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');

/**
 * Why `dir`'s node_modules does not match its package-lock.json, or undefined when it does.
 * @param {string} dir
 * @returns {string | undefined}
 */
export function mismatch(dir) {
  const lock = readJson(join(dir, 'package-lock.json'));
  // npm writes this "hidden lockfile" on every install: what is in node_modules.
  const installed = readJson(join(dir, 'node_modules', '.package-lock.json'));
  if (!lock) return 'package-lock.json is missing';
  if (!installed) return 'node_modules is missing';
  for (const [path, wanted] of Object.entries(lock.packages ?? {})) {
    if (path === '' || wanted.link) continue;
    const have = installed.packages?.[path];
    // Optional packages (platform builds such as @esbuild/*) are absent where they do not apply.
    if (!have && wanted.optional) continue;
    if (!have) return `${path.replace(/^node_modules\//, '')} is not installed`;
    if (have.version !== wanted.version)
      return `${path.replace(/^node_modules\//, '')} is ${have.version}, the lockfile says ${wanted.version}`;
  }
  // The hidden lockfile cannot see a package folder deleted by hand.
  const manifest = lock.packages?.[''] ?? {};
  for (const name of Object.keys({ ...manifest.dependencies, ...manifest.devDependencies })) {
    if (!existsSync(join(dir, 'node_modules', name, 'package.json'))) return `${name} is not installed`;
  }
  return undefined;
}

/** @param {string} file */
function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Ratchet runs on Node 22 or newer (@google/genai 3.x needs it; Node 20 reached its end of life in April 2026). */
export const NODE_MAJOR = 22;

if (import.meta.filename === resolve(process.argv[1] ?? '')) {
  const major = Number(process.versions.node.split('.')[0]);
  if (major < NODE_MAJOR) {
    console.error(
      `ratchet: needs Node ${NODE_MAJOR} or newer, this is ${process.version}; install Node ${NODE_MAJOR} or 24 (nodejs.org, or your version manager) and run the command again`,
    );
    process.exit(2);
  }
  const why = mismatch(root);
  if (why) {
    console.log(`ratchet: installing dependencies from package-lock.json (${why})`);
    // Under npm, npm_execpath is the npm that is running us; otherwise the one on PATH.
    const npm = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ['npm'];
    const [file, ...args] = [...npm, 'ci', '--no-audit', '--no-fund', '--loglevel=error'];
    const run = spawnSync(file, args, { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
    if (run.status !== 0) {
      console.error('ratchet: `npm ci` failed (see above); fix it and run the command again');
      process.exit(run.status ?? 1);
    }
  }
}
