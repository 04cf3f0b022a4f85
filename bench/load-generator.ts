/**
 * The bench's load generator, a process of its own (forked by bench/embedded.ts),
 * so that signing and sending deliveries never shares a thread with the systems
 * measured or with the effects receiver. Told what to play by message:
 *
 * - `play`: one of the three mixes (mixes.ts), its `concurrency` (or the one asked) at a time, as
 *   fast as the system answers (closed loop);
 * - `requests`: requests made whole by the asker (any path and headers: another
 *   provider's signed webhook, a call to the API), played the same way;
 * - `offer`: fresh state changes (`batch.succeeded` for `<prefix>-<i>`) at a
 *   fixed rate whatever the answers (open loop, Gemini's many senders), each
 *   answer counted as 200, 503 or other, and a connection reset or refused as
 *   such; the 200s with the time they came (for effect lag).
 *
 * `url` may be several, comma-separated: the requests go to each in turn (a
 * round-robin front before several instances).
 *
 * Requests go through undici's Pool (one per target, up to 1,024 connections),
 * cheaper per request than fetch, so the generator is not what caps the floor.
 */
import { Pool } from 'undici';
import { envelope, signedDelivery } from '../test/support/deliveries.ts';
import { type Mix, mixes, type Played, type PreparedRequest, percentile, playMix, playRequests, type Send } from './mixes.ts';

export type { Played };

export type GeneratorRequest =
  | { type: 'play'; url: string; secret: string; prefix: string; size: number; mix: number; concurrency?: number }
  | { type: 'offer'; url: string; secret: string; prefix: string; rate: number; count: number }
  | { type: 'requests'; requests: PreparedRequest[]; concurrency: number };

export interface Offered {
  /** The rate the requests went out at. */
  achievedRate: number;
  /** Answers (200 or 503) per second, from the first request to the last answer. */
  answeredRate: number;
  /** 200s per second, over the same time. */
  okRate: number;
  /** Time to each answer, p50 and p99 (ms). */
  p50: number;
  p99: number;
  ok: number;
  unavailable: number;
  other: number;
  /** Connections reset or refused: what a server must never do to a whole request. */
  reset: number;
  /** name → when its 200 came (epoch ms), for effect lag. */
  acknowledged: Record<string, number>;
  /** Answers (200 or 503) per second of the run, in order. */
  answeredPerSecond: number[];
}

const pools = new Map<string, Pool>();
let turn = 0;
const send: Send = (urls, body, headers) => {
  const list = urls.split(',');
  const target = new URL(list[turn++ % list.length] as string);
  let pool = pools.get(target.origin);
  if (!pool) {
    pool = new Pool(target.origin, { connections: 1_024, pipelining: 1 });
    pools.set(target.origin, pool);
  }
  return pool.request({ method: 'POST', path: target.pathname, headers, body }).then(async (response) => {
    await response.body.dump();
    return response.statusCode;
  });
};

async function offer(request: Extract<GeneratorRequest, { type: 'offer' }>): Promise<Offered> {
  const result: Offered = {
    achievedRate: 0,
    answeredRate: 0,
    okRate: 0,
    p50: 0,
    p99: 0,
    ok: 0,
    unavailable: 0,
    other: 0,
    reset: 0,
    acknowledged: {},
    answeredPerSecond: [],
  };
  const latencies: number[] = [];
  const sends: Promise<void>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < request.count; i++) {
    const wait = t0 + (i * 1000) / request.rate - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const name = `batches/${request.prefix}-${i}`;
    const { body, headers } = signedDelivery(request.secret, envelope('batch.succeeded', { id: name }));
    const sent = performance.now();
    sends.push(
      send(request.url, body, headers).then(
        (status) => {
          latencies.push(performance.now() - sent);
          const second = Math.floor((performance.now() - t0) / 1000);
          result.answeredPerSecond[second] = (result.answeredPerSecond[second] ?? 0) + 1;
          if (status === 200) {
            result.ok++;
            result.acknowledged[name] = Date.now();
          } else if (status === 503) result.unavailable++;
          else result.other++;
        },
        () => {
          result.reset++;
        },
      ),
    );
  }
  result.achievedRate = request.count / ((performance.now() - t0) / 1000);
  await Promise.all(sends);
  const seconds = (performance.now() - t0) / 1000;
  result.answeredRate = (result.ok + result.unavailable + result.other) / seconds;
  result.okRate = result.ok / seconds;
  result.p50 = percentile(latencies, 0.5);
  result.p99 = percentile(latencies, 0.99);
  result.answeredPerSecond = Array.from(result.answeredPerSecond, (n) => n ?? 0);
  return result;
}

/** The mix asked for, `concurrency` at a time when given (else its own). */
function played(request: Extract<GeneratorRequest, { type: 'play' }>): Mix {
  const mix = mixes(request.prefix, request.size)[request.mix] as Mix;
  return request.concurrency ? { ...mix, concurrency: request.concurrency } : mix;
}

process.on('message', async (request: GeneratorRequest) => {
  try {
    const answer =
      request.type === 'play'
        ? await playMix(request.url, request.secret, played(request), send)
        : request.type === 'requests'
          ? await playRequests(request.requests, request.concurrency, send)
          : await offer(request);
    process.send?.({ ok: true, answer });
  } catch (error) {
    process.send?.({ ok: false, message: (error as Error).message });
  }
});
process.on('disconnect', () => process.exit(0));
