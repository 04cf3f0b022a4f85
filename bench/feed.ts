/**
 * The change feed, measured on a Ratchet process of its own (sink on), fed by
 * the load generator's process:
 * - watch lag: fresh state changes offered at 10 and 500 deliveries/s; from
 *   each webhook's 200 (stamped by the generator) to a `watch` consumer in
 *   this process seeing the change (the client's long poll, as an app uses it);
 * - waiting costs: the webhook path's throughput (the storm mix, closed loop)
 *   with nothing held, beside 1,000 idle per-operation long polls and 100
 *   idle change streams held at once, and beside those plus 100 streams that
 *   follow every change; the runtime's CPU time per delivery (steadier than
 *   throughput on shared cores) and RSS in each case. Rounds interleave.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RatchetClient } from '../sdk/client.ts';
import { newSecret } from '../test/support/deliveries.ts';
import { Receiver } from '../test/support/receiver.ts';
import { percentile } from './mixes.ts';
import { cpuMs, rssMb, type Started, startGenerator, startProcess, stopProcess } from './processes.ts';

export interface FeedBenchOptions {
  root: string;
  /** Deliveries per throughput sample (the storm mix). */
  size: number;
  rounds: number;
}

const TOKEN = 'bench-api-token-0123456789abcdef';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export async function benchFeed(options: FeedBenchOptions): Promise<void> {
  const { root } = options;
  const secret = newSecret();
  const outbound = newSecret();
  const receiver = await new Receiver(outbound).start();
  const work = mkdtempSync(join(tmpdir(), 'ratchet-bench-feed-'));
  const generator = startGenerator(root);
  let ratchet: Started | undefined;
  try {
    ratchet = await startProcess(
      [process.execPath, '--import', 'tsx', 'local/start.ts'],
      {
        DATA_DIR: join(work, 'data'),
        PORT: '0',
        WEBHOOK_SIGNING_SECRETS: secret,
        EFFECTS_WEBHOOK_URL: receiver.url,
        EFFECTS_SIGNING_SECRET: outbound,
        RATCHET_API_TOKEN: TOKEN,
        TRACK_RATE_PER_MINUTE: '1000000',
      },
      /Ratchet ready at (http:\/\/\S+) /,
      root,
    );
    const url = ratchet.url;
    const webhook = `${url}/webhooks/gemini`;
    const client = new RatchetClient({ url, token: TOKEN });

    // Warm-up.
    for (let pass = 0; pass < 2; pass++) await generator.play(webhook, secret, `feed-warm-${pass}`, options.size, 1);

    console.log('\n## The change feed\n');
    console.log(
      `Watch lag (sink on; fresh state changes offered at a fixed rate; from each webhook's 200 to a \`watch\` consumer seeing it):\n`,
    );
    console.log('| offered deliveries/s | achieved | changes seen | lag p50 ms | lag p95 ms | lag max ms |');
    console.log('|---:|---:|---:|---:|---:|---:|');
    for (const [rate, count] of [
      [10, 100],
      [500, 2_500],
    ] as const) {
      const prefix = `watch-${rate}`;
      const seen = new Map<string, number>();
      const stop = new AbortController();
      const after = (await client.changes()).cursor;
      const watching = (async () => {
        for await (const change of client.watch({ kind: 'batch', after, signal: stop.signal }))
          if (change.name.startsWith(`batches/${prefix}-`) && !seen.has(change.name)) seen.set(change.name, Date.now());
      })().catch(() => undefined);
      const offered = await generator.offer(webhook, secret, prefix, rate, count);
      const acknowledged = Object.entries(offered.acknowledged);
      const deadline = Date.now() + 30_000;
      while (acknowledged.some(([name]) => !seen.has(name)) && Date.now() < deadline) await sleep(20);
      stop.abort();
      await watching;
      const lags = acknowledged.filter(([name]) => seen.has(name)).map(([name, at]) => (seen.get(name) as number) - at);
      console.log(
        `| ${rate} | ${offered.achievedRate.toFixed(0)} | ${lags.length} of ${acknowledged.length} | ${percentile(lags, 0.5).toFixed(1)} | ${percentile(lags, 0.95).toFixed(1)} | ${Math.max(...lags).toFixed(0)} |`,
      );
    }

    // Waiters: 1,000 operations tracked, never delivered to, each with a long poll held on it.
    for (let i = 0; i < 1_000; i += 100) await Promise.all(Array.from({ length: 100 }, (_, k) => client.track(`batches/idle-${i + k}`)));
    const holders: AbortController[] = [];
    const hold = (path: string, stream: boolean) => {
      const stop = new AbortController();
      holders.push(stop);
      void (async () => {
        while (!stop.signal.aborted) {
          try {
            const response = await fetch(`${url}${path}`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: stop.signal });
            if (stream) for await (const _ of response.body as unknown as AsyncIterable<Uint8Array>);
            else await response.text();
          } catch {
            // aborted, or the server went away
          }
        }
      })();
    };
    const release = async () => {
      for (const stop of holders.splice(0)) stop.abort();
      await sleep(500);
    };
    const throughput = async (held: 'none' | 'idle' | 'following', round: number) => {
      if (held !== 'none') {
        for (let i = 0; i < 1_000; i++) hold(`/operations/batches/idle-${i}?wait=60`, false);
        for (let i = 0; i < 100; i++) hold('/changes/stream?kind=video', true);
        if (held === 'following') for (let i = 0; i < 100; i++) hold('/changes/stream', true);
        await sleep(1_500);
      }
      const pid = ratchet?.child.pid as number;
      const cpuBefore = cpuMs(pid);
      const played = await generator.play(webhook, secret, `feed-${held}-${round}`, options.size, 1);
      const cpu = (cpuMs(pid) - cpuBefore) / options.size;
      const rss = rssMb(pid);
      await release();
      return { perSecond: played.perSecond, rss, cpu };
    };
    const samples: Record<'none' | 'idle' | 'following', Array<{ perSecond: number; rss: number; cpu: number }>> = {
      none: [],
      idle: [],
      following: [],
    };
    for (let round = 0; round < options.rounds; round++) {
      const order = (['none', 'idle', 'following'] as const).map(
        (_, k, all) => all[(k + round) % all.length] as 'none' | 'idle' | 'following',
      );
      for (const held of order) samples[held].push(await throughput(held, round));
    }
    const median = (held: keyof typeof samples, field: 'perSecond' | 'rss' | 'cpu') =>
      percentile(
        samples[held].map((s) => s[field]),
        0.5,
      );
    console.log(
      `\nWaiting costs (the storm mix, ${options.size} deliveries, closed loop, ${options.rounds} interleaved rounds, medians; waiters held from this process):\n`,
    );
    console.log('| held at once | webhook deliveries/s | × none held | runtime CPU ms per delivery | × none held | runtime RSS MB |');
    console.log('|---|---:|---:|---:|---:|---:|');
    const rows = [
      ['none', 'nothing'],
      ['idle', '1,000 idle long polls + 100 idle streams'],
      ['following', 'those + 100 streams following every change'],
    ] as const;
    for (const [held, label] of rows) {
      console.log(
        `| ${label} | ${median(held, 'perSecond').toFixed(0)} | ${(median(held, 'perSecond') / median('none', 'perSecond')).toFixed(2)} | ${median(held, 'cpu').toFixed(3)} | ${(median(held, 'cpu') / median('none', 'cpu')).toFixed(2)} | ${median(held, 'rss').toFixed(0)} |`,
      );
    }
  } finally {
    generator.stop();
    if (ratchet) await stopProcess(ratchet);
    await receiver.stop();
    rmSync(work, { recursive: true, force: true });
  }
}
