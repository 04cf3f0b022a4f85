/**
 * Builds the published packages from this repository's sources, and packs them.
 *
 *   npm run build                 every package, staged in dist/packages/<name>/
 *   npm run pack                  the same, then one tarball per package in dist/tarballs/
 *   npm run pack -- --out DIR     the tarballs in DIR
 *
 * Each package is described once, in PACKAGES below, beside its committed
 * manifest and README in packages/<name>/. What a build makes of it:
 * - JavaScript: one esbuild bundle of Ratchet's own code per entry point (ESM,
 *   Node 22, chunks shared between entries, lazy imports kept lazy). Third-party
 *   packages stay dependencies, imported at run time, except the few listed as
 *   `bundled` (zod in the client: its 8 MB package for a few KB of checks).
 * - Types: tsc's declarations, rolled up per entry (rollup-plugin-dts) so a
 *   package's `.d.ts` names only its own dependencies and peers, with
 *   declaration maps into the TypeScript sources shipped in `src/`.
 * - The construct's Lambda bundles, prebuilt (lib/lambda-bundle.ts), in
 *   `dist/functions/`, with lib/function-code.prebuilt.ts in place of the
 *   module that bundles at synth.
 * - LICENSE, and THIRD_PARTY_NOTICES.md naming every package bundled inside.
 * The build fails when a bundle imports a package its manifest does not declare.
 *
 * Why esbuild and not tsc for the JavaScript: measured in docs/benchmarks.md
 * ("Packages"): the server's start, files and size either way.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { build, type Metafile, type Plugin } from 'esbuild';
import { rollup } from 'rollup';
import { dts } from 'rollup-plugin-dts';
import { bundleLambda } from '../lib/lambda-bundle.ts';

const ROOT = resolve(import.meta.dirname, '..');
const OUT = join(ROOT, 'dist');
const TYPES = join(OUT, 'types');

interface PackageSpec {
  /** Entry name (dist/<name>.js) → source file, relative to the repository root. */
  entries: Record<string, string>;
  /** Emit rolled-up declarations for each entry. */
  types: boolean;
  /** Programs (a manifest's bin) → source file: bundled like entries, without declarations. */
  programs?: Record<string, string>;
  /** Modules the package runs itself (a forked process) → source file: bundled like entries, neither exported nor a bin. */
  internal?: Record<string, string>;
  /** Third-party packages compiled into the bundle instead of depended on. */
  bundled?: string[];
  /** Packages a bundled one requires only if installed (inside a try): left out, and allowed to be missing. */
  optional?: string[];
  /** Source modules replaced in this package's build: what the repository uses → what the package uses. */
  substitutes?: Record<string, string>;
  /** Lambda handlers prebuilt into dist/functions/<handler>/. */
  functions?: string[];
  /**
   * A bundled CommonJS package requires Node's built-ins (prom-client's `util`, `cluster`): each output file gets a
   * module-scoped `require` (node:module's createRequire), which esbuild's require shim then finds. Node only.
   */
  requireShim?: boolean;
}

export const PACKAGES: Record<string, PackageSpec> = {
  client: {
    entries: { index: 'sdk/client.ts', receiver: 'sdk/receiver.ts' },
    types: true,
    bundled: ['zod'],
  },
  genai: { entries: { index: 'sdk/genai.ts' }, types: true },
  openai: { entries: { index: 'sdk/openai.ts' }, types: true },
  anthropic: { entries: { index: 'sdk/anthropic.ts' }, types: true },
  cdk: {
    entries: { index: 'lib/ratchet.ts' },
    types: true,
    substitutes: { 'lib/function-code.ts': 'lib/function-code.prebuilt.ts' },
    // The commands that reach a deployed stack (connect, redrive --stack): the AWS user's, so the server carries no AWS SDK.
    programs: { 'ratchet-aws': 'lib/cli/ratchet-aws.ts' },
    functions: [
      'lambda/handlers/api.ts',
      'lambda/handlers/effects.ts',
      'lambda/handlers/reconcile.ts',
      'lambda/handlers/poll-worker.ts',
      'lambda/handlers/history.ts',
      'lambda/handlers/bedrock-events.ts',
    ],
  },
  // index: createRatchet, Ratchet inside an app. derived-process: the embedded engine's second process (history, effects),
  // forked by the runtime.
  server: {
    entries: { index: 'local/library.ts' },
    programs: { ratchet: 'local/cli/ratchet.ts' },
    internal: { 'derived-process': 'local/derived-process.ts' },
    types: true,
    // The SDK and its dependencies (google-auth-library, gaxios, ws…) are 30 of the 70 MB an install took, for the
    // few hundred KB reconcile runs; zod is 8 MB for a few KB of checks (docs/benchmarks.md, "Packages").
    // prom-client serves /metrics; the OpenTelemetry SDK and its OTLP exporters (30 MB installed) are a chunk of their
    // own, loaded only when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    bundled: [
      'zod',
      '@google/genai',
      // Each provider's SDK, a chunk of its own loaded only where that provider has a credential (app/reconcile/providers.ts).
      'openai',
      '@anthropic-ai/sdk',
      '@aws-sdk/client-bedrock',
      'prom-client',
      '@opentelemetry/api',
      '@opentelemetry/core',
      '@opentelemetry/resources',
      '@opentelemetry/sdk-metrics',
      '@opentelemetry/sdk-trace',
      '@opentelemetry/exporter-metrics-otlp-http',
      '@opentelemetry/exporter-metrics-otlp-proto',
      '@opentelemetry/exporter-trace-otlp-http',
      '@opentelemetry/exporter-trace-otlp-proto',
    ],
    // ws's optional helpers; the client's SigV4 signer, loaded only for a deployed stack's URL (never by ratchet.client).
    optional: ['bufferutil', 'utf-8-validate', '@smithy/signature-v4', '@smithy/core', '@aws-sdk/credential-provider-node'],
    requireShim: true,
  },
};

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  bin?: Record<string, string>;
}

export function manifestOf(name: string): Manifest {
  return JSON.parse(readFileSync(join(ROOT, 'packages', name, 'package.json'), 'utf8'));
}

/** The package a bare import names: `@scope/name` or `name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return (specifier.startsWith('@') ? parts.slice(0, 2) : parts.slice(0, 1)).join('/');
}

/** Every package a bundle may import at run time: the manifest's dependencies and peers. */
function declared(manifest: Manifest): Set<string> {
  return new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
}

/** Resolves the substituted modules to their package stand-ins. */
function substitute(map: Record<string, string>): Plugin {
  const targets = new Map(Object.entries(map).map(([from, to]) => [resolve(ROOT, from), resolve(ROOT, to)]));
  return {
    name: 'ratchet-substitutes',
    setup(b) {
      b.onResolve({ filter: /^\.\.?\// }, (args) => {
        const target = targets.get(resolve(args.resolveDir, args.path));
        return target ? { path: target } : undefined;
      });
    },
  };
}

/**
 * Leaves every bare import that is not `bundled` to run time (node_modules, as
 * the manifest declares). A bundled package brings what it imports in with it
 * (its own dependencies are its business, not the manifest's).
 */
function externals(bundled: string[], optional: string[]): Plugin {
  return {
    name: 'ratchet-externals',
    setup(b) {
      b.onResolve({ filter: /^[^./#]/ }, (args) =>
        (bundled.includes(packageOf(args.path)) || args.importer.includes('/node_modules/')) && !optional.includes(packageOf(args.path))
          ? undefined
          : { path: args.path, external: true },
      );
    },
  };
}

async function buildJavaScript(name: string, spec: PackageSpec, dir: string): Promise<Metafile> {
  const manifest = manifestOf(name);
  const result = await build({
    entryPoints: Object.fromEntries(
      Object.entries({ ...spec.entries, ...spec.programs, ...spec.internal }).map(([entry, source]) => [entry, join(ROOT, source)]),
    ),
    outdir: join(dir, 'dist'),
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: 'linked',
    sourcesContent: false,
    metafile: true,
    logLevel: 'warning',
    absWorkingDir: ROOT,
    // The server's bin runs as a program.
    banner: {
      js: [
        ...(manifest.bin ? ['#!/usr/bin/env node'] : []),
        ...(spec.requireShim
          ? [
              "import { createRequire as __ratchetCreateRequire } from 'node:module';",
              'const require = __ratchetCreateRequire(import.meta.url);',
            ]
          : []),
      ].join('\n'),
    },
    plugins: [substitute(spec.substitutes ?? {}), externals(spec.bundled ?? [], spec.optional ?? [])],
  });
  // What the bundles still import once tree-shaken is what installs must provide.
  const allowed = new Set([...declared(manifest), ...(spec.optional ?? [])]);
  const problems = Object.entries(result.metafile.outputs).flatMap(([output, { imports }]) =>
    imports
      .filter(({ external, path }) => external && !isBuiltin(path) && !allowed.has(packageOf(path)))
      .map(({ path }) => `${manifest.name}: ${relative(ROOT, output)} imports ${path}, not a dependency or peer`),
  );
  if (problems.length > 0) throw new Error(`undeclared imports:\n  ${problems.join('\n  ')}`);
  return result.metafile;
}

/** tsc's declarations of every entry that has types, once for all packages (the programs overlap). */
function emitDeclarations(): void {
  const sources = Object.values(PACKAGES).flatMap((spec) => (spec.types ? Object.values(spec.entries) : []));
  const tsc = join(ROOT, 'node_modules/typescript/bin/tsc');
  execFileSync(
    process.execPath,
    [
      tsc,
      ...['--declaration', '--emitDeclarationOnly', '--declarationMap', '--outDir', TYPES, '--rootDir', ROOT],
      ...['--target', 'ES2022', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--types', 'node'],
      ...['--strict', '--skipLibCheck', '--allowImportingTsExtensions', '--verbatimModuleSyntax', '--resolveJsonModule'],
      ...sources.map((source) => join(ROOT, source)),
    ],
    { cwd: ROOT, stdio: 'inherit' },
  );
}

/** Rolls each entry's declarations into dist/<entry>.d.ts, importing only packages the manifest declares. */
async function buildTypes(name: string, spec: PackageSpec, dir: string): Promise<void> {
  const manifest = manifestOf(name);
  const allowed = declared(manifest);
  const problems: string[] = [];
  const bundle = await rollup({
    input: Object.fromEntries(
      Object.entries(spec.entries).map(([entry, source]) => [entry, join(TYPES, source.replace(/\.ts$/, '.d.ts'))]),
    ),
    plugins: [
      {
        // tsc keeps the sources' `.ts` specifiers in its declarations: each names the `.d.ts` beside it.
        name: 'ratchet-declaration-specifiers',
        resolveId(source, importer) {
          if (importer && /^\.\.?\/.*\.ts$/.test(source)) return resolve(dirname(importer), source.replace(/\.ts$/, '.d.ts'));
          return null;
        },
      },
      dts({ sourcemap: true, respectExternal: false }),
    ],
    onwarn(warning) {
      problems.push(`${manifest.name}: ${warning.message}`);
    },
    // Bare imports stay imports; which of them survive the roll-up is checked on the output below.
    external: (id) => !id.startsWith('node:') && !/^[./]/.test(id),
  });
  await bundle.write({
    dir: join(dir, 'dist'),
    format: 'es',
    sourcemap: true,
    entryFileNames: '[name].d.ts',
    chunkFileNames: 'chunks/[name]-[hash].d.ts',
  });
  await bundle.close();
  for (const file of walk(join(dir, 'dist')).filter((f) => f.endsWith('.d.ts')))
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g))
      if (!/^(node:|\.)/.test(specifier as string) && !allowed.has(packageOf(specifier as string)))
        problems.push(`${manifest.name}: ${relative(dir, file)} imports ${specifier}, not a dependency or peer`);
  if (problems.length > 0) throw new Error(`types:\n  ${problems.join('\n  ')}`);
}

/**
 * Points every map's repository sources at the copies shipped in `src/`
 * (copied here), so go-to-definition and stack traces land in real files.
 */
function shipSources(dir: string): void {
  const dist = join(dir, 'dist');
  for (const file of walk(dist).filter((f) => f.endsWith('.map') && !f.includes(`${join('dist', 'functions')}`))) {
    const map = JSON.parse(readFileSync(file, 'utf8')) as { sources: string[]; sourceRoot?: string };
    map.sources = map.sources.map((source) => {
      const absolute = resolve(dirname(file), map.sourceRoot ?? '', source);
      let repoPath = relative(ROOT, absolute);
      // Declaration maps point at tsc's declarations' own sources: the same paths under dist/types.
      if (repoPath.startsWith(`dist${'/'}types/`)) repoPath = repoPath.slice('dist/types/'.length);
      if (repoPath.startsWith('..') || repoPath.startsWith('node_modules/')) return source;
      const copy = join(dir, 'src', repoPath);
      mkdirSync(dirname(copy), { recursive: true });
      cpSync(join(ROOT, repoPath), copy);
      return relative(dirname(file), copy);
    });
    delete map.sourceRoot;
    writeFileSync(file, JSON.stringify(map));
  }
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? walk(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

interface BundledPackage {
  license: string;
  /** Its licence and notice files' text, as its package ships them. */
  texts: string[];
}

/** Each third-party package whose code a bundle holds (name@version), with its licence. */
function bundledPackages(inputs: string[]): Map<string, BundledPackage> {
  const found = new Map<string, BundledPackage>();
  for (const input of inputs) {
    const match = input.match(/^(?:.*\/)?node_modules\/((?:@[^/]+\/)?[^/]+)\//);
    if (!match) continue;
    const root = join(ROOT, input.slice(0, (match.index ?? 0) + match[0].length));
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; version: string; license?: string };
    const key = `${pkg.name}@${pkg.version}`;
    if (found.has(key)) continue;
    const texts = readdirSync(root)
      .filter((file) => /^(licen[cs]e|notice|copying)(\.|$)/i.test(file))
      .map((file) => readFileSync(join(root, file), 'utf8').trim());
    found.set(key, { license: pkg.license ?? 'see the package', texts });
  }
  return new Map([...found].sort(([a], [b]) => a.localeCompare(b)));
}

/** THIRD_PARTY_NOTICES.md: what the bundles hold, each package's licence and, as their licences ask, its licence text. */
function writeNotices(dir: string, packages: Map<string, BundledPackage>): void {
  const list = [...packages].map(([pkg, { license }]) => `- ${pkg}: ${license}`);
  const texts = [...packages].flatMap(([pkg, { texts }]) => texts.map((text) => `## ${pkg}\n\n\`\`\`\`text\n${text}\n\`\`\`\`\n`));
  writeFileSync(
    join(dir, 'THIRD_PARTY_NOTICES.md'),
    list.length === 0
      ? 'This package holds no third-party code: its dependencies are installed beside it.\n'
      : `This package holds code of these packages, compiled into its bundles (each under its own licence, in its own package on the npm registry):\n\n${list.join('\n')}\n\n${texts.join('\n')}`,
  );
}

export async function buildPackages(only?: string[]): Promise<Record<string, string>> {
  const names = only ?? Object.keys(PACKAGES);
  rmSync(TYPES, { recursive: true, force: true });
  if (names.some((name) => PACKAGES[name]?.types)) emitDeclarations();
  const staged: Record<string, string> = {};
  for (const name of names) {
    const spec = PACKAGES[name];
    if (!spec) throw new Error(`no package ${name} (packages: ${Object.keys(PACKAGES).join(', ')})`);
    const dir = join(OUT, 'packages', name);
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    for (const file of ['package.json', 'README.md']) cpSync(join(ROOT, 'packages', name, file), join(dir, file));
    cpSync(join(ROOT, 'LICENSE'), join(dir, 'LICENSE'));
    const inputs = Object.keys((await buildJavaScript(name, spec, dir)).inputs);
    if (spec.types) await buildTypes(name, spec, dir);
    for (const handler of spec.functions ?? [])
      inputs.push(...bundleLambda(handler, join(dir, 'dist', 'functions', handler.replace(/^.*\/|\.ts$/g, ''))).inputs);
    shipSources(dir);
    writeNotices(dir, bundledPackages(inputs));
    staged[name] = dir;
  }
  return staged;
}

/** `npm pack` of each staged package into `out`; the tarballs' paths by package. */
export function packPackages(staged: Record<string, string>, out: string): Record<string, string> {
  mkdirSync(out, { recursive: true });
  const tarballs: Record<string, string> = {};
  for (const [name, dir] of Object.entries(staged)) {
    const [packed] = JSON.parse(
      execFileSync('npm', ['pack', '--json', '--pack-destination', out, dir], {
        cwd: ROOT,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    ) as Array<{ filename: string }>;
    tarballs[name] = join(out, (packed as { filename: string }).filename);
  }
  return tarballs;
}

function kilobytes(file: string): string {
  return `${Math.round(statSync(file).size / 1024)} KB`;
}

if (import.meta.filename === resolve(process.argv[1] ?? '')) {
  const usage = 'usage: npm run build [-- <package> …] | npm run pack [-- --out DIR] [<package> …]';
  let args: ReturnType<
    typeof parseArgs<{ options: { pack: { type: 'boolean' }; out: { type: 'string' }; help: { type: 'boolean' } }; allowPositionals: true }>
  >;
  try {
    args = parseArgs({
      options: { pack: { type: 'boolean' }, out: { type: 'string' }, help: { type: 'boolean' } },
      allowPositionals: true,
    });
  } catch (error) {
    console.error(`build: ${(error as Error).message.split(/\.\s/)[0]} (${usage})`);
    process.exit(2);
  }
  if (args.values.help) {
    console.log(
      `${usage}\n  Builds ${Object.keys(PACKAGES).join(', ')} into dist/packages/; --pack also writes their tarballs (default dist/tarballs/).`,
    );
    process.exit(0);
  }
  const unknown = args.positionals.filter((name) => !PACKAGES[name]);
  if (unknown.length > 0) {
    console.error(`build: no package ${unknown.join(', ')} (${usage}; packages: ${Object.keys(PACKAGES).join(', ')})`);
    process.exit(2);
  }
  try {
    const staged = await buildPackages(args.positionals.length > 0 ? args.positionals : undefined);
    if (args.values.pack) {
      const tarballs = packPackages(staged, resolve(args.values.out ?? join(OUT, 'tarballs')));
      for (const file of Object.values(tarballs)) console.log(`${relative(process.cwd(), file)}  ${kilobytes(file)}`);
    } else for (const dir of Object.values(staged)) console.log(relative(process.cwd(), dir));
  } catch (error) {
    console.error(`build: ${(error as Error).message}`);
    process.exit(1);
  }
}
