/**
 * What a latency proxy adds beyond the delay it was asked for, as a process
 * of its own (forked by bench/postgres-distance.ts), so that neither the
 * bench's receiver nor the proxy's own load shares its thread: while a
 * system's load goes through its proxy, it times a trivial statement over
 * each URL it was given in turn (the server directly, the proxy's undelayed
 * listener, the delayed one the load takes), one at a time, and answers the
 * rounds when asked to stop.
 *
 * Messages: `{ start: string[] }` (URLs, each connected once and kept), then
 * `{ stop: true }`, answered `{ rounds: number[][] }` (each round one time in
 * ms per URL, in the order given).
 */
import { resolve } from 'node:path';
import pg from 'pg';

/** The probe's text, which the proxies' statement counts leave out. */
export const PROBE = 'SELECT 1 /* latency probe */';
/** A pause between rounds: a probe, not a load. */
const PAUSE_MS = 5;

const clients = new Map<string, pg.Client>();
async function clientFor(url: string): Promise<pg.Client> {
  let client = clients.get(url);
  if (!client) {
    client = new pg.Client({ connectionString: url, application_name: 'bench-probe' });
    await client.connect();
    clients.set(url, client);
  }
  return client;
}

async function timed(client: pg.Client): Promise<number> {
  const started = performance.now();
  await client.query(PROBE);
  return performance.now() - started;
}

let probing: Promise<number[][]> | undefined;
let stopping = false;

async function loop(connected: pg.Client[]): Promise<number[][]> {
  const rounds: number[][] = [];
  while (!stopping) {
    const round: number[] = [];
    for (const client of connected) round.push(await timed(client));
    rounds.push(round);
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS));
  }
  return rounds;
}

// Forked as a process (not when imported for PROBE).
if (process.send && import.meta.filename === resolve(process.argv[1] ?? '')) {
  process.on('message', async (message: { start?: string[]; stop?: boolean }) => {
    if (message.start) {
      stopping = false;
      const connected = await Promise.all(message.start.map(clientFor));
      // One untimed round: a connection's first statement is not what the proxy adds.
      for (const client of connected) await timed(client);
      probing = loop(connected);
      process.send?.({ started: true });
    } else if (message.stop) {
      stopping = true;
      process.send?.({ rounds: await (probing ?? Promise.resolve([])) });
      probing = undefined;
    }
  });
  process.on('disconnect', () => process.exit(0));
}
