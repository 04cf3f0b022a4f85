/**
 * The stack synthesized as `cdk synth` does, bundling on (the local esbuild),
 * into a temporary cloud assembly outside the project (whose package.json
 * says "type": "module": Lambda has no such file either).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from 'aws-cdk-lib';
import { RatchetStack, type RatchetStackProps } from '../../../lib/ratchet-stack.ts';
import { type CfnTemplate, logicalIdIn } from './template.ts';

export interface Synthesized {
  outdir: string;
  template: CfnTemplate;
  /** The entry module (`index.mjs`) of the function whose logical id starts with `prefix`. */
  bundleOf(prefix: string): string;
  remove(): void;
}

/** `props`: the construct's settings (the defaults when left out). */
export function synthesizeWithBundles(props: Omit<RatchetStackProps, 'env'> = {}): Synthesized {
  const outdir = mkdtempSync(join(tmpdir(), 'ratchet-cdk-'));
  const app = new App({ outdir });
  new RatchetStack(app, 'Ratchet', { ...props, env: { account: '123456789012', region: 'us-east-1' } });
  app.synth();
  const template = JSON.parse(readFileSync(join(outdir, 'Ratchet.template.json'), 'utf8')) as CfnTemplate;
  return {
    outdir,
    template,
    bundleOf(prefix) {
      const fn = template.Resources[logicalIdIn(template, 'AWS::Lambda::Function', prefix)] as CfnTemplate['Resources'][string];
      const code = (fn.Properties as { Code: { S3Key: string } }).Code;
      return join(outdir, `asset.${code.S3Key.replace(/\.zip$/, '')}`, 'index.mjs');
    },
    remove: () => rmSync(outdir, { recursive: true, force: true }),
  };
}
