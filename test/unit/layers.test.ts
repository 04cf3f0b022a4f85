/**
 * The import graph of Ratchet's own code (docs/design.md, "Layout"): each ring
 * imports only from those inside it, no file imports itself round a circle, the
 * core imports nothing of Ratchet's and no I/O, an engine's SDK is imported
 * inside that engine's folder only, every engine is reached from outside
 * through its index.ts only (and DynamoDB's SDK-free tables.ts, for the
 * stack), only the instance starts an engine, the HTTP routes take no hook
 * from a front end, and each telemetry backend stays in its home.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const RINGS = [
  'core',
  'providers',
  'app',
  'engines/sql',
  'engines/dynamodb',
  'engines/sqlite',
  'engines/postgres',
  'lambda',
  'local',
  'lib',
  'bin',
  'sdk',
] as const;
type Ring = (typeof RINGS)[number];

/** Who may import whom: a ring itself and those listed. */
const MAY_IMPORT: Record<Ring, Ring[]> = {
  core: [],
  // Each provider's knowledge (providers/port.ts): the application reaches providers through it, never the reverse.
  providers: ['core'],
  app: ['core', 'providers'],
  // What the SQL engines share (beside them, not in the application).
  'engines/sql': ['core', 'app'],
  'engines/dynamodb': ['core', 'app'],
  'engines/sqlite': ['core', 'app', 'engines/sql'],
  'engines/postgres': ['core', 'app', 'engines/sql'],
  lambda: ['core', 'providers', 'app', 'engines/dynamodb'],
  local: ['core', 'providers', 'app', 'engines/sqlite', 'engines/postgres', 'sdk'],
  lib: ['core', 'providers', 'app', 'engines/dynamodb', 'lambda'],
  bin: ['core', 'app', 'lib'],
  sdk: ['core'],
};

/** Each provider's official SDK: imported only inside that provider's folder. */
const PROVIDER_SDKS: Record<string, RegExp> = {
  'providers/openai': /^openai(\/|$)/,
  'providers/anthropic': /^@anthropic-ai\/sdk(\/|$)/,
  'providers/bedrock': /^@aws-sdk\/client-bedrock$/,
};

/** Each engine's own SDK: imported only inside the engine's folder. */
const ENGINE_SDKS: Record<string, RegExp> = {
  'engines/dynamodb': /^@aws-sdk\/(client-dynamodb|lib-dynamodb|util-dynamodb)$/,
  'engines/sqlite': /^libsql$/,
  'engines/postgres': /^pg(-|$)/,
};

/** What the core may import: pure libraries, no I/O. */
const CORE_PACKAGES = /^(zod\/mini|lossless-json)$/;

const ringOf = (file: string): Ring | undefined => RINGS.find((ring) => file === ring || file.startsWith(`${ring}/`));

function sources(dir: string): string[] {
  return readdirSync(join(PROJECT_ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return sources(path);
    return /\.(ts|mts|mjs)$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

interface Import {
  from: string;
  /** A repository path for a relative import, else the package's specifier. */
  to: string;
  relative: boolean;
}

const SPECIFIER =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|^import\s+['"]([^'"]+)['"]/gm;

function importsOf(file: string): Import[] {
  const text = readFileSync(join(PROJECT_ROOT, file), 'utf8');
  return [...text.matchAll(SPECIFIER)].map((match) => {
    const specifier = (match[1] ?? match[2] ?? match[3]) as string;
    const isRelative = specifier.startsWith('.');
    return { from: file, to: isRelative ? normalize(join(dirname(file), specifier)) : specifier, relative: isRelative };
  });
}

const files = RINGS.flatMap((ring) => {
  try {
    return sources(ring);
  } catch {
    return []; // a ring not built yet (engines/postgres before its engine)
  }
});
const imports = files.flatMap(importsOf);

describe('the import graph', () => {
  it('reads every ring (the check checks something)', () => {
    for (const ring of ['core', 'app', 'engines/dynamodb', 'engines/sqlite', 'lambda', 'local', 'lib', 'sdk'] as const)
      expect(files.filter((f) => ringOf(f) === ring).length, ring).toBeGreaterThan(0);
    expect(imports.filter((i) => i.relative).length).toBeGreaterThan(300);
  });

  it('has each ring import only from itself and the rings inside it: nothing upward, no engine from another', () => {
    const upward = imports
      .filter((i) => i.relative)
      .filter((i) => {
        const [from, to] = [ringOf(i.from), ringOf(i.to)];
        return from !== undefined && to !== from && !(to !== undefined && MAY_IMPORT[from].includes(to));
      })
      .map((i) => `${i.from} -> ${i.to}`);
    expect(upward).toEqual([]);
  });

  it("imports each provider's SDK inside that provider's folder only", () => {
    const used = imports.filter((i) => !i.relative && Object.values(PROVIDER_SDKS).some((sdk) => sdk.test(i.to)));
    const astray = used
      .filter((i) => !Object.entries(PROVIDER_SDKS).some(([home, sdk]) => sdk.test(i.to) && i.from.startsWith(`${home}/`)))
      .filter((i) => !i.from.startsWith('sdk/'))
      .map((i) => `${i.from} -> ${i.to}`);
    expect(astray).toEqual([]);
  });

  it("reaches each engine from outside it through its doors only: index.ts, and DynamoDB's SDK-free tables.ts", () => {
    const engines = ['engines/sqlite', 'engines/postgres', 'engines/dynamodb'];
    const reached = imports.filter((i) => i.relative && engines.includes(ringOf(i.to) as string) && ringOf(i.from) !== ringOf(i.to));
    // The check checks something: every front end and the stack reach an engine.
    for (const ring of ['local', 'lambda', 'lib'] as const)
      expect(reached.filter((i) => ringOf(i.from) === ring).length, ring).toBeGreaterThan(0);
    const around = reached
      .filter((i) => !i.to.endsWith('/index.ts') && i.to !== 'engines/dynamodb/tables.ts')
      .map((i) => `${i.from} -> ${i.to}`);
    expect(around).toEqual([]);
  });

  it("has the stack (lib/) read DynamoDB's tables without its SDK: tables.ts imports none, nor does anything it imports", () => {
    const seen = new Set<string>();
    const reach = (file: string): Import[] => {
      if (seen.has(file)) return [];
      seen.add(file);
      const own = imports.filter((i) => i.from === file);
      return [...own, ...own.filter((i) => i.relative && files.includes(i.to)).flatMap((i) => reach(i.to))];
    };
    const fromTables = reach('engines/dynamodb/tables.ts');
    expect(seen.size).toBeGreaterThan(0);
    expect(fromTables.filter((i) => !i.relative && i.to.startsWith('@aws-sdk/')).map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
    const libReaches = imports.filter(
      (i) => ringOf(i.from) === 'lib' && ringOf(i.to) === 'engines/dynamodb' && !i.from.startsWith('lib/cli/'),
    );
    expect(libReaches.filter((i) => i.to !== 'engines/dynamodb/tables.ts').map((i) => `${i.from} -> ${i.to}`)).toEqual([]);
  });

  it('has only the instance (app/instance.ts) start an engine', () => {
    const starts = files.filter((file) => /\b(engine|home)\??\.start\(/.test(readFileSync(join(PROJECT_ROOT, file), 'utf8')));
    expect(starts).toEqual(['app/instance.ts']);
  });

  it('has nothing in app/http take a callback from a front end: no function of a Hono app, no import from a front end', () => {
    const http = files.filter((file) => file.startsWith('app/http/'));
    expect(http.length).toBeGreaterThan(5);
    const hooks = http.filter((file) => /\(\s*\w+\s*:\s*Hono\b[^)]*\)\s*=>/.test(readFileSync(join(PROJECT_ROOT, file), 'utf8')));
    expect(hooks).toEqual([]);
  });

  it('keeps each telemetry backend in its home: app/ on @opentelemetry/api alone, the SDK and Prometheus in local/, EMF in lambda/', () => {
    const homes: Array<[RegExp, Ring]> = [
      [/^@opentelemetry\/(?!api$)/, 'local'],
      [/^prom-client$/, 'local'],
      [/^@aws-lambda-powertools\/metrics$/, 'lambda'],
    ];
    const used = imports.filter((i) => !i.relative && homes.some(([pattern]) => pattern.test(i.to)));
    expect(used.length).toBeGreaterThan(3);
    const astray = used
      .filter((i) => homes.some(([pattern, home]) => pattern.test(i.to) && ringOf(i.from) !== home))
      .map((i) => `${i.from} -> ${i.to}`);
    expect(astray).toEqual([]);
  });

  it('has no import circle', () => {
    const edges = new Map<string, string[]>();
    for (const i of imports.filter((i) => i.relative && files.includes(i.to))) edges.set(i.from, [...(edges.get(i.from) ?? []), i.to]);
    // Tarjan's strongly connected components: a component of more than one file, or a file importing itself, is a circle.
    const index = new Map<string, number>();
    const low = new Map<string, number>();
    const stack: string[] = [];
    const onStack = new Set<string>();
    const circles: string[][] = [];
    let next = 0;
    const visit = (file: string) => {
      index.set(file, next);
      low.set(file, next++);
      stack.push(file);
      onStack.add(file);
      for (const to of edges.get(file) ?? []) {
        if (!index.has(to)) {
          visit(to);
          low.set(file, Math.min(low.get(file) as number, low.get(to) as number));
        } else if (onStack.has(to)) low.set(file, Math.min(low.get(file) as number, index.get(to) as number));
      }
      if (low.get(file) === index.get(file)) {
        const component: string[] = [];
        let member: string;
        do {
          member = stack.pop() as string;
          onStack.delete(member);
          component.push(member);
        } while (member !== file);
        if (component.length > 1 || (edges.get(file) ?? []).includes(file)) circles.push(component.sort());
      }
    };
    for (const file of files) if (!index.has(file)) visit(file);
    expect(circles).toEqual([]);
  });

  it('keeps the core pure: nothing of the rest of Ratchet, no Node module, only pure libraries', () => {
    const outside = imports
      .filter((i) => ringOf(i.from) === 'core')
      .filter((i) => (i.relative ? ringOf(i.to) !== 'core' : !CORE_PACKAGES.test(i.to)))
      .map((i) => `${i.from} -> ${i.to}`);
    expect(outside).toEqual([]);
  });

  it("imports each engine's SDK inside that engine's folder only", () => {
    const leaks = imports
      .filter((i) => !i.relative)
      .flatMap((i) =>
        Object.entries(ENGINE_SDKS)
          .filter(([engine, sdk]) => sdk.test(i.to) && ringOf(i.from) !== engine)
          .map(([engine]) => `${i.from} imports ${i.to} (${engine}'s)`),
      );
    expect(leaks).toEqual([]);
  });
});
