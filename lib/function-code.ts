/**
 * Each function's deployment package, in this repository: bundled at synth
 * from its source by the local esbuild (lib/lambda-bundle.ts; no Docker).
 * The published @ratchet/cdk ships the same bundles prebuilt instead: its
 * build (packages/build.ts) puts function-code.prebuilt.ts in this module's place.
 */
import { resolve } from 'node:path';
import { AssetHashType, DockerImage } from 'aws-cdk-lib';
import { Code } from 'aws-cdk-lib/aws-lambda';
import { bundleLambda } from './lambda-bundle.ts';

const ROOT = resolve(import.meta.dirname, '..');

/** `entry`: the handler module, relative to the repository root (it exports `handler`). */
export function functionCode(entry: string): Code {
  return Code.fromAsset(ROOT, {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      local: {
        tryBundle: (outputDir) => {
          bundleLambda(entry, outputDir);
          return true;
        },
      },
      // Never run: the local esbuild always bundles (CDK asks for an image all the same). The command names the
      // entry because CDK caches a bundling by its JSON, where tryBundle is invisible: without it, the four
      // functions would share one bundle.
      image: DockerImage.fromRegistry('ratchet-bundles-locally-with-esbuild'),
      command: ['esbuild', entry],
    },
  });
}
