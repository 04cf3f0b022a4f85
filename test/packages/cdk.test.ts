/**
 * CDK apps outside the repository on the installed @ratchet/cdk: one laid out
 * as `cdk init app --language typescript` lays it out (ts-node in cdk.json,
 * CommonJS, no esbuild anywhere), and examples/cdk-app (which bundles its own
 * functions with NodejsFunction, so it brings its own esbuild).
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { type FreshApp, freshApp, locked } from '../support/fresh-app.ts';
import { PROJECT_ROOT } from '../support/ratchet-process.ts';

const tarballs = inject('tarballs');
const apps: FreshApp[] = [];
afterAll(() => {
  for (const app of apps) app.remove();
});

type Template = { Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>; Outputs: Record<string, unknown> };

async function synth(app: FreshApp, stack: string): Promise<Template> {
  await app.exec('npx', ['--no-install', 'cdk', 'synth', '--no-notices', '-q', '-o', 'cdk.out'], { CDK_DISABLE_VERSION_CHECK: 'true' });
  return JSON.parse(readFileSync(join(app.dir, 'cdk.out', `${stack}.template.json`), 'utf8'));
}

const resourcesOf = (template: Template, type: string) => Object.values(template.Resources).filter((r) => r.Type === type);

describe('@ratchet/cdk, installed', () => {
  it('synthesizes in an app laid out by cdk init (ts-node, CommonJS) with no esbuild installed, and cfn-lint passes its template', async () => {
    const app = await freshApp(
      'cdk-init',
      [
        tarballs.cdk as string,
        locked('aws-cdk-lib'),
        locked('constructs'),
        locked('aws-cdk'),
        locked('ts-node'),
        locked('typescript'),
        locked('@types/node'),
      ],
      { bin: { 'my-app': 'bin/my-app.js' }, scripts: { build: 'tsc', cdk: 'cdk' } },
    );
    apps.push(app);
    // cdk init's files (aws-cdk 2.1xx, TypeScript, before its switch to tsx): CommonJS compiled by ts-node.
    app.write('cdk.json', JSON.stringify({ app: 'npx ts-node --prefer-ts-exts bin/my-app.ts' }));
    app.write(
      'tsconfig.json',
      JSON.stringify({
        compilerOptions: {
          target: 'ES2020',
          module: 'commonjs',
          lib: ['es2020', 'dom'],
          declaration: true,
          strict: true,
          noImplicitAny: true,
          strictNullChecks: true,
          noImplicitThis: true,
          alwaysStrict: true,
          noImplicitReturns: true,
          inlineSourceMap: true,
          inlineSources: true,
          experimentalDecorators: true,
          strictPropertyInitialization: false,
          typeRoots: ['./node_modules/@types'],
        },
        exclude: ['node_modules', 'cdk.out'],
      }),
    );
    execFileSync('mkdir', ['-p', join(app.dir, 'bin'), join(app.dir, 'lib')]);
    app.write(
      'bin/my-app.ts',
      `#!/usr/bin/env node
import * as cdk from 'aws-cdk-lib';
import { MyAppStack } from '../lib/my-app-stack';

const app = new cdk.App();
new MyAppStack(app, 'MyAppStack', {});
`,
    );
    app.write(
      'lib/my-app-stack.ts',
      `import * as cdk from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { Ratchet } from '@ratchet/cdk';

export class MyAppStack extends cdk.Stack {
  constructor(scope: Construct, id: string, props?: cdk.StackProps) {
    super(scope, id, props);
    const ratchet = new Ratchet(this, 'Ratchet');
    new cdk.CfnOutput(this, 'RatchetApiUrl', { value: ratchet.apiUrl });
  }
}
`,
    );
    expect(existsSync(join(app.dir, 'node_modules', 'esbuild'))).toBe(false);
    const template = await synth(app, 'MyAppStack');
    const functions = resourcesOf(template, 'AWS::Lambda::Function');
    // API, effects, reconcile's dispatcher and poll worker, history and Bedrock's events.
    expect(functions).toHaveLength(6);
    for (const fn of functions) expect(fn.Properties.Runtime).toBe('nodejs24.x');
    expect(Object.keys(template.Outputs)).toEqual(expect.arrayContaining(['ApiUrl', 'RatchetApiUrl']));
    // The prebuilt bundles, staged as the functions' assets.
    const staged = readFileSync(join(app.dir, 'cdk.out', 'MyAppStack.assets.json'), 'utf8');
    expect(staged.match(/"packaging": "zip"/g)?.length).toBeGreaterThanOrEqual(4);
    await app.exec('cfn-lint', [join('cdk.out', 'MyAppStack.template.json')]);

    // The AWS commands come with the construct: ratchet-aws connect, redrive and backfill-list, each with --help and one-line bad usage.
    const ratchetAws = (args: string[]) =>
      promisify(execFile)('npx', ['--no-install', 'ratchet-aws', ...args], { cwd: app.dir }).then(
        ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
        (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
      );
    expect(await ratchetAws(['--version'])).toMatchObject({ code: 0, stdout: `ratchet-aws 0.1.0 (node ${process.version})\n` });
    for (const command of ['connect', 'redrive', 'backfill-list']) {
      const help = await ratchetAws([command, '--help']);
      expect({ command, code: help.code }).toEqual({ command, code: 0 });
      expect(help.stdout).toMatch(new RegExp(`^usage: ratchet-aws ${command} --stack NAME`));
      const bad = await ratchetAws([command]);
      expect({ command, code: bad.code, stdout: bad.stdout }).toEqual({ command, code: 2, stdout: '' });
      expect(bad.stderr.trim()).toBe(
        `ratchet-aws ${command}: --stack NAME is required (usage: ${help.stdout.split('\n')[0]?.replace(/^usage: /, '')}; see --help)`,
      );
    }
  });

  it('examples/cdk-app synthesizes on the installed packages: a rule for succeeded batches, a function allowed to track and read', async () => {
    const app = await freshApp('cdk-example', [
      tarballs.cdk as string,
      tarballs.client as string,
      locked('aws-cdk-lib'),
      locked('constructs'),
      locked('aws-cdk'),
      locked('esbuild'),
      locked('tsx'),
      // The submitter signs its calls to the stack with SigV4: the client's optional peers, bundled into it.
      locked('@smithy/signature-v4'),
      locked('@smithy/core'),
      locked('@aws-sdk/credential-provider-node'),
    ]);
    apps.push(app);
    for (const file of ['app.ts', 'cdk.json', 'on-batch-done.ts', 'submitter.ts'])
      app.copy(join(PROJECT_ROOT, 'examples/cdk-app', file), file);
    const template = await synth(app, 'MyApp');
    const rules = resourcesOf(template, 'AWS::Events::Rule').filter((r) => r.Properties.EventBusName);
    expect(rules.map((r) => r.Properties.EventPattern)).toEqual([
      { source: ['ratchet'], 'detail-type': ['Operation State Changed'], detail: { kind: ['batch'], state: ['SUCCEEDED'] } },
    ]);
    const invokes = JSON.stringify(resourcesOf(template, 'AWS::IAM::Policy').map((r) => r.Properties.PolicyDocument));
    expect(invokes).toContain('execute-api:Invoke');
    expect(invokes).toContain('/$default/POST/operations');
    expect(invokes).toContain('/$default/GET/operations/*');
    expect(Object.keys(template.Outputs)).toContain('ApiUrl');
    // Ratchet's six and the example's own two.
    expect(resourcesOf(template, 'AWS::Lambda::Function')).toHaveLength(8);
  });
});
