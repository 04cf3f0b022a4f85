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

const bundles = new Map<string, ReturnType<typeof bundleLambda>>();
const bundleOf = (handler: string) => {
  if (!bundles.has(handler)) bundles.set(handler, bundleLambda(`lambda/handlers/${handler}.ts`, join(outdir, handler)));
  return bundles.get(handler) as ReturnType<typeof bundleLambda>;
};
const initOf = (handler: string) => bundleOf(handler).initInputs;
/** The SDKs reconcile polls the providers with. */
const PROVIDER_SDKS = ['@google/genai', 'openai', '@anthropic-ai/sdk', '@aws-sdk/client-bedrock'];
const packagesIn = (inputs: string[], names: string[]) =>
  names.filter((name) => inputs.some((input) => input.includes(`node_modules/${name}/`)));

describe('a cold start compiles only what every invocation needs', () => {
  it("api: not the Lambda client (verify-by-poll), jose (JWT deliveries) or any provider's SDK (a delivery names its job; reconcile polls it)", () => {
    const init = initOf('api');
    expect(packagesIn(init, ['@aws-sdk/client-dynamodb', 'hono'])).toEqual(['@aws-sdk/client-dynamodb', 'hono']);
    expect(init).toContain('providers/openai/events.ts');
    expect(packagesIn(init, ['@aws-sdk/client-lambda', 'jose', ...PROVIDER_SDKS])).toEqual([]);
    // Not even lazily: no path of the API function polls.
    expect(packagesIn(bundleOf('api').inputs, PROVIDER_SDKS)).toEqual([]);
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

  it("reconcile: no provider's SDK (each loaded when its provider is opened, where it has a credential), though all are in its bundle", () => {
    const init = initOf('reconcile');
    expect(packagesIn(init, ['@aws-sdk/client-dynamodb'])).toEqual(['@aws-sdk/client-dynamodb']);
    expect(init).toContain('app/reconcile/open.ts');
    expect(packagesIn(init, PROVIDER_SDKS)).toEqual([]);
    expect(packagesIn(bundleOf('reconcile').inputs, PROVIDER_SDKS)).toEqual(PROVIDER_SDKS);
  });

  it("bedrock-events: the table and the mapping, no provider's SDK, no secrets, no HTTP framework", () => {
    const { inputs } = bundleOf('bedrock-events');
    expect(packagesIn(inputs, ['@aws-sdk/client-dynamodb'])).toEqual(['@aws-sdk/client-dynamodb']);
    expect(inputs).toContain('providers/bedrock/events.ts');
    expect(packagesIn(inputs, [...PROVIDER_SDKS, '@aws-sdk/client-secrets-manager', 'hono'])).toEqual([]);
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
