/**
 * Runs a bundled function as Lambda would: a new Node process imports its
 * `index.mjs` (an ES module, its chunks beside it) and calls the handler
 * with each event in turn, in one process (so a warm second invocation is
 * warm). Only PATH and the given variables reach it.
 */
import { execFile } from 'node:child_process';
import { dirname } from 'node:path';
import { promisify } from 'node:util';

const RUN_HANDLER = `
const events = JSON.parse(process.argv[2]);
(async () => {
  const { handler } = await import(require('node:url').pathToFileURL(process.argv[1]).href);
  const results = [];
  for (const event of events) results.push(await handler(event, { awsRequestId: 'r', getRemainingTimeInMillis: () => 9000 }));
  console.log(JSON.stringify(results));
})().catch((e) => { console.error(e); process.exit(1); });
`;

/** A function process's whole environment: PATH, the region, quiet Powertools, and `env`. */
export function lambdaProcessEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    AWS_REGION: 'us-east-1',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
    POWERTOOLS_METRICS_DISABLED: 'true',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    ...env,
  };
}

/** The handler's results, one per event; rejects with the process's error when an invocation throws. */
export async function runBundle(bundle: string, events: unknown[], env: Record<string, string>): Promise<unknown[]> {
  const { stdout } = await promisify(execFile)(process.execPath, ['-e', RUN_HANDLER, bundle, JSON.stringify(events)], {
    cwd: dirname(dirname(bundle)),
    env: lambdaProcessEnv(env),
  });
  return JSON.parse(stdout);
}
