/**
 * The three delivery mixes of issue 11, as Gemini would send them: bodies and
 * webhook-ids fixed up front (a redelivery repeats both), signed when sent;
 * and the closed loop that plays them, or requests made whole elsewhere
 * (bench/providers.ts: other providers' webhooks, calls to the API).
 */
import { envelope, signedDelivery } from '../test/support/deliveries.ts';
import { shuffle } from '../test/support/shuffle.ts';

export interface Delivery {
  id: string;
  body: string;
}

export interface Mix {
  label: string;
  concurrency: number;
  deliveries: Delivery[];
}

const at = (i: number) =>
  `2026-11-30T10:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}.${String(i).padStart(6, '0')}Z`;

/** `prefix` keeps each round's operations apart. */
export function mixes(prefix: string, size: number): Mix[] {
  // 1. Each operation's terminal webhook once, plus 20 % Gemini redeliveries (same webhook-id, same body).
  const realistic: Delivery[] = [];
  for (let i = 0; i < size; i++) {
    const delivery = {
      id: `msg_${prefix}_r${i}`,
      body: JSON.stringify(envelope('batch.succeeded', { id: `batches/${prefix}-r${i}` }, at(i))),
    };
    realistic.push(delivery);
    if (i % 5 === 0) realistic.push(delivery);
  }
  // 2. A storm: interactions each announced waiting for action four times (ascending times), then completed; shuffled.
  const storm: Delivery[] = [];
  for (let i = 0; i < size / 5; i++) {
    for (let step = 0; step < 5; step++) {
      const type = step < 4 ? 'interaction.requires_action' : 'interaction.completed';
      const data = { id: `interactions/${prefix}-s${i}`, update_time: at(step + 1) };
      storm.push({ id: `msg_${prefix}_s${i}_${step}`, body: JSON.stringify(envelope(type, data, at(step + 1))) });
    }
  }
  // 3. One hot operation: updates with ascending times, sent 32 at a time.
  const hot: Delivery[] = Array.from({ length: size }, (_, i) => ({
    id: `msg_${prefix}_h${i}`,
    body: JSON.stringify(envelope('interaction.requires_action', { id: `interactions/${prefix}-hot`, update_time: at(i + 1) }, at(i + 1))),
  }));
  return [
    { label: 'terminal once + 20 % redeliveries', concurrency: 8, deliveries: shuffle(realistic, size) },
    { label: 'storm of interaction updates', concurrency: 8, deliveries: shuffle(storm, size + 1) },
    { label: 'one hot operation, 32 concurrent', concurrency: 32, deliveries: hot },
  ];
}

/** The value at `p` (0–1) of the sorted samples; `percentile(xs, 0.5)` is the median as the bench reports it. */
export const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] as number;

export interface Played {
  perSecond: number;
  p50: number;
  p99: number;
  /** Answered 503 (not recorded: the sender would retry). */
  notRecorded: number;
}

/** One POST; resolves with the answer's status. */
export type Send = (url: string, body: string, headers: Record<string, string>) => Promise<number>;

const fetchSend: Send = async (url, body, headers) => {
  const response = await fetch(url, { method: 'POST', body, headers });
  await response.arrayBuffer();
  return response.status;
};

/** Sends a mix's deliveries, signed, `mix.concurrency` at a time; any answer but 200 or 503 stops the bench. */
export function playMix(url: string, secret: string, mix: Mix, send: Send = fetchSend): Promise<Played> {
  return closedLoop(
    mix.deliveries.length,
    mix.concurrency,
    (i) => {
      const delivery = mix.deliveries[i] as Delivery;
      return { url, ...signedDelivery(secret, delivery.body, { id: delivery.id }) };
    },
    (status) => status === 200,
    send,
  );
}

/**
 * A request made whole up front, sent as it is: another provider's signed webhook (its own path and headers), or a
 * call to Ratchet's API (`POST /operations` with its token).
 */
export interface PreparedRequest {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/** Sends prepared requests in order, `concurrency` at a time; any answer but a 2xx or 503 stops the bench. */
export function playRequests(requests: PreparedRequest[], concurrency: number, send: Send = fetchSend): Promise<Played> {
  return closedLoop(
    requests.length,
    concurrency,
    (i) => requests[i] as PreparedRequest,
    (status) => status >= 200 && status < 300,
    send,
  );
}

/**
 * `count` requests, `concurrency` at a time, each sent as soon as one is answered (closed loop), timed from the send
 * to the answer; a 503 is counted not recorded, any other answer `accepted` refuses stops the bench.
 */
async function closedLoop(
  count: number,
  concurrency: number,
  requestAt: (i: number) => PreparedRequest,
  accepted: (status: number) => boolean,
  send: Send,
): Promise<Played> {
  const latencies: number[] = [];
  let notRecorded = 0;
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const { url, body, headers } = requestAt(next++);
        const sent = performance.now();
        const status = await send(url, body, headers);
        latencies.push(performance.now() - sent);
        if (status === 503) notRecorded++;
        else if (!accepted(status)) throw new Error(`${url} answered ${status}`);
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return {
    perSecond: count / seconds,
    p50: percentile(latencies, 0.5),
    p99: percentile(latencies, 0.99),
    notRecorded,
  };
}
