/**
 * What each Lambda's cold start compiles (its init chunks, from the build's
 * metafile), and what it leaves to the one path that needs it: each client or
 * library below is a chunk of its own, loaded by import() on first use.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildSync } from 'esbuild';
import { afterAll, describe, expect, it } from 'vitest';
import { bundleLambda, initChunksOf } from '../../lib/lambda-bundle.ts';

const outdir = mkdtempSync(join(tmpdir(), 'ratchet-lazy-'));
afterAll(() => rmSync(outdir, { recursive: true, force: true }));

const initOf = (handler: string) => bundleLambda(`lambda/handlers/${handler}.ts`, join(outdir, handler)).initInputs;
const packagesIn = (inputs: string[], names: string[]) =>
  names.filter((name) => inputs.some((input) => input.includes(`node_modules/${name}/`)));

describe('a cold start compiles only what every invocation needs', () => {
  it('api: not the Lambda client (verify-by-poll), jose (JWT deliveries) or the Gemini SDK', () => {
    const init = initOf('api');
    expect(packagesIn(init, ['@aws-sdk/client-dynamodb', 'hono'])).toEqual(['@aws-sdk/client-dynamodb', 'hono']);
    expect(packagesIn(init, ['@aws-sdk/client-lambda', 'jose', '@google/genai'])).toEqual([]);
  });

  it("api: not the routes only the homes off AWS serve (the change feed's stream, the effects admin, /metrics)", () => {
    const init = initOf('api');
    expect(init.filter((input) => /hono\/dist\/helper\/streaming\//.test(input))).toEqual([]);
  });

  it('effects: not SQS (a backoff) nor the signed webhook sink and its signing library (only when the webhook is on)', () => {
    const init = initOf('effects');
    expect(packagesIn(init, ['@aws-sdk/client-eventbridge'])).toEqual(['@aws-sdk/client-eventbridge']);
    expect(packagesIn(init, ['@aws-sdk/client-sqs', 'standardwebhooks', 'fast-sha256'])).toEqual([]);
    expect(init.filter((input) => /lambda\/(effects\/webhook-sink|http\/webhook-signature)\.ts$/.test(input))).toEqual([]);
  });

  it('reconcile: not the Gemini SDK (a run with nothing due never loads it)', () => {
    const init = initOf('reconcile');
    expect(packagesIn(init, ['@aws-sdk/client-dynamodb'])).toEqual(['@aws-sdk/client-dynamodb']);
    expect(packagesIn(init, ['@google/genai'])).toEqual([]);
  });
});

/** The source files `entry`'s start compiles: its chunk and those it imports statically (packages left out). */
function startInputs(entry: string): string[] {
  const { metafile } = buildSync({
    entryPoints: [entry],
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    packages: 'external',
    outdir: join(outdir, 'start'),
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
  return [...initChunksOf(metafile)].flatMap((key) => Object.keys(metafile.outputs[key]?.inputs ?? {}));
}

describe('ratchet start compiles at its start only what every start needs', () => {
  it("not the SQLite engine's derived work (its own process loads it), OpenTelemetry's SDK (only with an endpoint) or any provider's poller", () => {
    const init = startInputs('local/runtime.ts');
    expect(
      init.filter((input) => /^(local\/(runtime|open|settings)|app\/instance|app\/reconcile\/providers)\.ts$/.test(input)),
    ).toHaveLength(5);
    expect(
      init.filter((input) =>
        /(engines\/sqlite\/derived-work|local\/telemetry\/otel|app\/reconcile\/gemini-poller|providers\/[a-z-]+\/poller)\.ts$/.test(input),
      ),
    ).toEqual([]);
  });
});
