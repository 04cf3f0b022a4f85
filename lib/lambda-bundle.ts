/**
 * How a Lambda handler becomes its deployment package: the one build the
 * stack deploys, the bundle tests load and the bench cold-starts.
 *
 * Each choice measured by `npm run bench` (bench/cold-start.ts):
 * - ESM preferring each package's `module` build: the AWS SDK's ES modules
 *   tree-shake, where its CommonJS build brings every command's code along.
 * - Code splitting: a client used on one path only (the Lambda client for
 *   verify-by-poll, SQS for an effect's backoff, the Gemini SDK for a poll)
 *   is a chunk beside the entry, loaded by `import()` when first used, so
 *   it is not read at cold start.
 * - The SDK's default credential chain replaced by its environment provider
 *   (lambda/aws-credentials.ts): the Lambda runtime always puts the
 *   function's credentials in the environment, and the rest of the chain
 *   (SSO, STS web identity, profiles, IMDS, the login flow) is a fifth of a
 *   bundle that Lambda never runs.
 * - Minified, with source maps in files beside the chunks and not loaded at
 *   start (`--enable-source-maps` costs every cold start).
 */
import { statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type BuildOptions, buildSync, type Metafile } from 'esbuild';

const ROOT = resolve(import.meta.dirname, '..');

/** The Node version of the Lambda runtime (lib/ratchet-function.ts), as esbuild's target. */
const LAMBDA_TARGET = 'node24';

function lambdaBuildOptions(root: string, entry: string, outdir: string): BuildOptions {
  return {
    entryPoints: { index: resolve(root, entry) },
    outdir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: LAMBDA_TARGET,
    mainFields: ['module', 'main'],
    // CommonJS packages inside an ES module still call require() for Node's own modules.
    banner: { js: "import{createRequire as __ratchetRequire}from'node:module';const require=__ratchetRequire(import.meta.url);" },
    alias: { '@aws-sdk/credential-provider-node': resolve(root, 'lambda/aws-credentials.ts') },
    // `debug` (under google-auth-library, for the Agent Platform) tries to require supports-color for terminal colours,
    // inside a try: left out, it is skipped, as in a Lambda without a terminal it should be.
    external: ['supports-color'],
    minify: true,
    sourcemap: true,
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: root,
  };
}

export interface LambdaBundle {
  /** The entry module (`index.mjs`; the handler is `index.handler`). */
  entry: string;
  /** Bytes of every chunk the entry imports statically: what a cold start reads before the handler runs. */
  initBytes: number;
  /** Bytes of every chunk, the lazily loaded ones included (source maps excluded). */
  totalBytes: number;
  /** The source files those init chunks hold (`node_modules/…`, `lambda/…`): what a cold start compiles. */
  initInputs: string[];
  /** Every source file in the bundle, relative to the root (the published construct names the third-party ones). */
  inputs: string[];
}

/** Builds `entry` (relative to `root`) into `outdir`, which is empty or missing. */
export function bundleLambda(entry: string, outdir: string, root = ROOT): LambdaBundle {
  const { metafile } = buildSync(lambdaBuildOptions(root, entry, outdir));
  return measure(metafile as Metafile, root, outdir);
}

/** The chunks a start loads (a build of one entry): the entry's, and those it imports statically, on and on. */
export function initChunksOf(metafile: Metafile): Set<string> {
  const outputs = metafile.outputs;
  const init = new Set<string>();
  const visit = (key: string) => {
    if (init.has(key)) return;
    init.add(key);
    for (const imported of outputs[key]?.imports ?? [])
      if (imported.kind === 'import-statement' && outputs[imported.path]) visit(imported.path);
  };
  // The entry's output: each chunk an import() loads names its module as `entryPoint` too, but only the entry's module
  // is imported by no other module of the build.
  const imported = new Set(Object.values(metafile.inputs).flatMap((input) => input.imports.map((i) => i.path)));
  const entries = Object.keys(outputs).filter((key) => {
    const module = outputs[key]?.entryPoint;
    return module !== undefined && !imported.has(module);
  });
  if (entries.length !== 1) throw new Error(`expected one entry point in the build, found ${entries.length}: ${entries.join(', ')}`);
  visit(entries[0] as string);
  return init;
}

function measure(metafile: Metafile, root: string, outdir: string): LambdaBundle {
  const outputs = metafile.outputs;
  const init = initChunksOf(metafile);
  const bytes = (keys: Iterable<string>) => [...keys].reduce((sum, key) => sum + statSync(resolve(root, key)).size, 0);
  return {
    entry: join(outdir, 'index.mjs'),
    initBytes: bytes(init),
    totalBytes: bytes(Object.keys(outputs).filter((key) => key.endsWith('.mjs'))),
    initInputs: [...new Set([...init].flatMap((key) => Object.keys(outputs[key]?.inputs ?? {})))],
    inputs: Object.keys(metafile.inputs),
  };
}
