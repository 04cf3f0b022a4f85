/**
 * The import graph of Ratchet's own code (docs/design.md, "Layout"): each ring
 * imports only from those inside it, no file imports itself round a circle, the
 * core imports nothing of Ratchet's and no I/O, an engine's SDK is imported
 * inside that engine's folder only, and `local/` reaches the engines behind
 * the Engine port (app/engine.ts) through their index.ts only.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const RINGS = [
  'core',
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
  app: ['core'],
  // What the SQL engines share (beside them, not in the application).
  'engines/sql': ['core', 'app'],
  'engines/dynamodb': ['core', 'app'],
  'engines/sqlite': ['core', 'app', 'engines/sql'],
  'engines/postgres': ['core', 'app', 'engines/sql'],
  lambda: ['core', 'app', 'engines/dynamodb'],
  local: ['core', 'app', 'engines/sqlite', 'engines/postgres', 'sdk'],
  lib: ['core', 'app', 'engines/dynamodb', 'lambda'],
  bin: ['core', 'app', 'lib'],
  sdk: ['core'],
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

  it('has the one-machine front ends reach the SQLite and PostgreSQL engines through their index.ts only (the Engine port)', () => {
    const behindPort = ['engines/sqlite', 'engines/postgres'];
    const reached = imports.filter((i) => i.relative && ringOf(i.from) === 'local' && behindPort.includes(ringOf(i.to) as string));
    expect(reached.length).toBeGreaterThan(5); // the check checks something
    const around = reached.filter((i) => !i.to.endsWith('/index.ts')).map((i) => `${i.from} -> ${i.to}`);
    expect(around).toEqual([]);
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
