/**
 * Each function's deployment package, in the published @ratchet/cdk: built
 * once by packages/build.ts (lib/lambda-bundle.ts) and shipped in
 * `functions/<handler>/` beside the construct, so an app's `cdk synth` needs
 * no esbuild, no Docker and none of Ratchet's sources.
 */
import { basename } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Code } from 'aws-cdk-lib/aws-lambda';

export function functionCode(entry: string): Code {
  return Code.fromAsset(fileURLToPath(new URL(`functions/${basename(entry, '.ts')}`, import.meta.url)));
}
