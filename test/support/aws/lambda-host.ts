/**
 * One warm Lambda execution environment for a bundle: a Node process that
 * imports the bundle's `index.mjs` (an ES module, its chunks beside it) once
 * and runs its handler for each invocation sent over IPC, one at a time (as
 * Lambda gives one environment one event at a time). Only PATH, the region,
 * quiet Powertools and the given variables reach it; with `logs`, the
 * function logs and publishes metrics as deployed, and its stdout (what
 * CloudWatch Logs would ingest) is counted. Each invocation's handler time and
 * the process's peak RSS are kept (`stats`) for the cost model
 * (bench/aws-cost.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname } from 'node:path';

const HOST = `
let handler;
let queue = Promise.resolve();
process.on('message', ({ id, event }) => {
  queue = queue.then(async () => {
    try {
      handler ??= (await import(require('node:url').pathToFileURL(process.argv[1]).href)).handler;
      const started = performance.now();
      const cpu = process.cpuUsage();
      const result = await handler(event, { awsRequestId: String(id), getRemainingTimeInMillis: () => 30000 });
      const ms = performance.now() - started;
      const { user, system } = process.cpuUsage(cpu);
      process.send({ id, result: result ?? null, ms, cpuMs: (user + system) / 1000, rss: process.memoryUsage.rss() });
    } catch (error) {
      process.send({ id, error: String(error && error.stack || error) });
    }
  });
});
`;

/** What one environment did: invocations, handler milliseconds in all (wall and CPU), its peak RSS, and its stdout's bytes. */
export interface HostStats {
  invocations: number;
  handlerMs: number;
  cpuMs: number;
  maxRssMb: number;
  stdoutBytes: number;
}

export class LambdaHost {
  readonly stats: HostStats = { invocations: 0, handlerMs: 0, cpuMs: 0, maxRssMb: 0, stdoutBytes: 0 };
  private readonly child: ChildProcess;
  private readonly pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  private next = 0;
  private stderr = '';

  constructor(
    readonly name: string,
    bundle: string,
    env: Record<string, string>,
    options: { logs?: boolean } = {},
  ) {
    this.child = spawn(process.execPath, ['-e', HOST, bundle], {
      cwd: dirname(dirname(bundle)),
      stdio: ['ignore', options.logs ? 'pipe' : 'ignore', 'pipe', 'ipc'],
      env: {
        PATH: process.env.PATH,
        AWS_REGION: 'us-east-1',
        ...(!options.logs && { POWERTOOLS_LOG_LEVEL: 'SILENT', POWERTOOLS_METRICS_DISABLED: 'true' }),
        AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
        ...env,
      },
    });
    this.child.stdout?.on('data', (chunk: Buffer) => {
      this.stats.stdoutBytes += chunk.length;
    });
    this.child.stderr?.on('data', (chunk) => {
      this.stderr = (this.stderr + chunk).slice(-4000);
    });
    this.child.on(
      'message',
      ({
        id,
        result,
        error,
        ms,
        cpuMs,
        rss,
      }: {
        id: number;
        result?: unknown;
        error?: string;
        ms?: number;
        cpuMs?: number;
        rss?: number;
      }) => {
        this.stats.invocations += 1;
        this.stats.handlerMs += ms ?? 0;
        this.stats.cpuMs += cpuMs ?? 0;
        // After each invocation (ru_maxrss would not do: Linux keeps the forking parent's across exec).
        this.stats.maxRssMb = Math.max(this.stats.maxRssMb, (rss ?? 0) / 2 ** 20);
        const call = this.pending.get(id);
        this.pending.delete(id);
        if (error !== undefined) call?.reject(new Error(`${this.name}: ${error}`));
        else call?.resolve(result);
      },
    );
    this.child.on('exit', (code) => {
      for (const call of this.pending.values()) call.reject(new Error(`${this.name} exited with ${code}:\n${this.stderr}`));
      this.pending.clear();
    });
  }

  /** The handler's result; rejects when the invocation throws (as Lambda reports a function error). */
  invoke<T = unknown>(event: unknown): Promise<T> {
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      this.child.send({ id, event });
    });
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGKILL');
    await exited;
  }
}

/** A new environment for the bundle, given each event in turn: the handler's results, or the first invocation's error. */
export async function runBundle(bundle: string, events: unknown[], env: Record<string, string>): Promise<unknown[]> {
  const host = new LambdaHost('bundle', bundle, env);
  try {
    const results = [];
    for (const event of events) results.push(await host.invoke(event));
    return results;
  } finally {
    await host.stop();
  }
}
