/**
 * The documentation stays true to the code: every relative link in the README,
 * docs/ and examples/ resolves (the file, and the heading its #anchor names);
 * every command in the shell blocks of the README and docs/ names a real npm script, a flag
 * that script's --help lists, a context value the CDK app reads and a
 * variable Ratchet knows; every `@ratchet/…` import in its code blocks names
 * a package entry point (packages/build.ts, packages/<name>/package.json)
 * that exports those names.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { manifestOf, PACKAGES } from '../../packages/build.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const read = (path: string) => readFileSync(join(PROJECT_ROOT, path), 'utf8');
const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };

function markdownFiles(): string[] {
  const found = ['README.md'];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(PROJECT_ROOT, dir))) {
      const path = join(dir, entry);
      if (statSync(join(PROJECT_ROOT, path)).isDirectory()) walk(path);
      else if (entry.endsWith('.md')) found.push(path);
    }
  };
  walk('docs');
  walk('examples');
  return found;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const withoutCode = markdown.replace(/```[\s\S]*?```/g, '');
  return new Set([...withoutCode.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1] as string)));
}

function codeBlocks(markdown: string, language: string): string[] {
  return [...markdown.matchAll(new RegExp(`\`\`\`${language}\\n([\\s\\S]*?)\`\`\``, 'g'))].map((m) => m[1] as string);
}

describe('the documentation', () => {
  it('has no broken relative link: each file exists and each #anchor is a heading there', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of markdownFiles()) {
      const text = read(file).replace(/```[\s\S]*?```/g, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/i.test(target as string)) continue; // https:, mailto:
        const [path, anchor] = (target as string).split('#') as [string, string | undefined];
        const resolved = path ? resolve(PROJECT_ROOT, dirname(file), path) : join(PROJECT_ROOT, file);
        checked++;
        let exists = false;
        try {
          statSync(resolved);
          exists = true;
        } catch {}
        if (!exists) broken.push(`${file}: ${target} (no ${relative(PROJECT_ROOT, resolved)})`);
        else if (anchor && resolved.endsWith('.md') && !anchorsOf(readFileSync(resolved, 'utf8')).has(anchor))
          broken.push(`${file}: ${target} (no heading #${anchor})`);
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(20);
  });

  it('has the README a newcomer reads in five minutes: at most about 250 lines', () => {
    expect(read('README.md').split('\n').length).toBeLessThanOrEqual(260);
  });

  it('runs only real scripts, flags, context values and variables in the shell blocks of the README and docs/', () => {
    const config = read('app/config.ts');
    const app = read('bin/ratchet.ts');
    const help = new Map<string, string>();
    /** `--help` of a command line that runs a TypeScript file (an npm script's, or the `ratchet` bin's). */
    const helpOf = (commandLine: string) => {
      if (!help.has(commandLine)) {
        const [, file, args = ''] = commandLine.match(/tsx (\S+\.ts)(.*)$/) ?? [];
        if (!file) throw new Error(`${commandLine} is not a tsx command line`);
        const argv = [...args.trim().split(/\s+/).filter(Boolean), '--help'];
        help.set(commandLine, execFileSync(process.execPath, ['--import', 'tsx', file, ...argv], { cwd: PROJECT_ROOT, encoding: 'utf8' }));
      }
      return help.get(commandLine) as string;
    };
    const ratchetBin = `tsx ${PACKAGES.server?.programs?.ratchet}`;
    const problems: string[] = [];
    let commands = 0;
    for (const block of ['README.md', ...markdownFiles().filter((f) => f.startsWith('docs/'))].flatMap((f) => codeBlocks(read(f), 'sh'))) {
      for (const raw of block.split('\n')) {
        const line = raw.replace(/\s+#.*$/, '').trim();
        if (!line) continue;
        commands++;
        for (const [, variable] of line.matchAll(/(?:^|export |\s)([A-Z][A-Z0-9_]+)=/g)) {
          // A configuration variable, or one the command-line tools read (where a running Ratchet is).
          const commandLineVariable = variable === 'RATCHET_URL' && read('local/cli/ratchet-url.ts').includes(variable);
          // OpenTelemetry's standard variables, read by its SDK: each one the contract names.
          const openTelemetryVariable = variable?.startsWith('OTEL_') && read('docs/contract.md').includes(`\`${variable}\``);
          if (!config.includes(`${variable}:`) && !commandLineVariable && !openTelemetryVariable)
            problems.push(`${line}: ${variable} is not a configuration variable`);
        }
        const npm = line.match(/npm (start|test|run (\S+))(?: -- (.*))?$/);
        if (npm) {
          const script = npm[2] ?? npm[1];
          if (!pkg.scripts[script as string]) problems.push(`${line}: no script ${script}`);
          else if (script !== 'test')
            for (const [flag] of (npm[3] ?? '').matchAll(/--[a-z][a-z-]*/g)) {
              if (!new RegExp(`${flag}(?![a-z-])`).test(helpOf(pkg.scripts[script as string] as string)))
                problems.push(`${line}: npm run ${script} -- --help lists no ${flag}`);
            }
        }
        // The installed server's bin: `npx ratchet <command> [flags]`.
        const bin = line.match(/npx ratchet (\S+)(.*)$/);
        if (bin) {
          const [, command, rest = ''] = bin;
          if (!new RegExp(`[<|]${command}[|>]`).test(helpOf(ratchetBin))) problems.push(`${line}: ratchet has no command ${command}`);
          else
            for (const [flag] of rest.matchAll(/--[a-z][a-z-]*/g)) {
              if (!new RegExp(`${flag}(?![a-z-])`).test(helpOf(`${ratchetBin} ${command}`)))
                problems.push(`${line}: ratchet ${command} --help lists no ${flag}`);
            }
        }
        for (const [, key] of line.matchAll(/ -c (\w+)=/g)) {
          if (!app.includes(`tryGetContext('${key}')`)) problems.push(`${line}: bin/ratchet.ts reads no context value ${key}`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(commands).toBeGreaterThan(15);
  });

  it('imports only real entry points and names in its TypeScript blocks', async () => {
    const problems: string[] = [];
    const docs = ['README.md', 'docs/apps.md'].map(read).join('\n');
    for (const block of [...codeBlocks(docs, 'ts'), ...codeBlocks(docs, 'js')]) {
      for (const [, names, entry, name, subpath] of block.matchAll(/import \{([^}]+)\} from '(@ratchet\/([a-z]+)(?:\/([a-z]+))?)'/g)) {
        const spec = PACKAGES[name as string];
        const exports = spec && (manifestOf(name as string) as { exports?: Record<string, unknown> }).exports;
        const source = spec?.entries[subpath ?? 'index'];
        if (!source || !exports?.[subpath ? `./${subpath}` : '.']) {
          problems.push(`${entry} is not an entry point`);
          continue;
        }
        const exported = await import(join(PROJECT_ROOT, source));
        for (const name of (names as string).split(',').map((n) => n.trim().replace(/^type /, ''))) {
          if (!(name in exported)) problems.push(`${entry} exports no ${name}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });
});
