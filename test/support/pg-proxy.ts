/**
 * A TCP proxy in front of PostgreSQL: the database a zone away on one
 * machine (every chunk held `delayMs` each way, in order), and a count of
 * round trips. A round trip is an exchange: the client speaks after the
 * server last did (or first); its first statement's text is kept (from the
 * wire protocol's Parse or Query message), so a test can say which
 * statements one webhook cost. Connection set-up (startup, TLS, password) is
 * not counted.
 *
 * It can also cut the network silently, as a partition that drops packets
 * does (a security group changed, a NAT's state lost, a failover behind a
 * proxy): nothing is forwarded either way and nothing is closed, so neither
 * side hears of it; no RST, no FIN. Healed, what each side sent meanwhile
 * arrives (TCP retransmits it), and a side that gave up and closed is closed
 * on the other.
 */
import { createServer, type Server, Socket } from 'node:net';

export interface PgProxy {
  /** `url` with its host and port pointed at the proxy. */
  urlFor(url: string): string;
  port: number;
  /** Exchanges since the last reset, each with the first statement the client sent in it. */
  exchanges(): string[];
  reset(): void;
  /** Stops forwarding both ways without closing anything; connections made meanwhile are accepted and held silent too. */
  cut(): void;
  /** Forwards again, what was held first. */
  heal(): void;
  stop(): Promise<void>;
}

/**
 * The statement a chunk of the client's starts: the first Parse ('P') or
 * simple Query ('Q') message's text, or for a prepared statement run again
 * by name (Bind, 'B', with no Parse), `EXECUTE <name>`.
 */
function statementIn(chunk: Buffer): string | undefined {
  let at = 0;
  while (at + 5 <= chunk.length) {
    const type = String.fromCharCode(chunk[at] as number);
    const length = chunk.readInt32BE(at + 1);
    if (length < 4) return undefined;
    if (type === 'Q') return chunk.toString('utf8', at + 5, chunk.indexOf(0, at + 5));
    if (type === 'P') {
      const text = chunk.indexOf(0, at + 5) + 1;
      return chunk.toString('utf8', text, chunk.indexOf(0, text));
    }
    if (type === 'B') {
      const name = chunk.indexOf(0, at + 5) + 1;
      return `EXECUTE ${chunk.toString('utf8', name, chunk.indexOf(0, name))}`;
    }
    at += 1 + length;
  }
  return undefined;
}

/** Forwards `chunk`s to `to` after `delayMs`, in order (Node fires timers of one duration in the order they were set). */
function delayed(to: Socket, delayMs: number): (chunk: Buffer) => void {
  if (delayMs <= 0) return (chunk) => to.write(chunk);
  return (chunk) => {
    setTimeout(() => to.write(chunk), delayMs);
  };
}

export async function startPgProxy(target: { host: string; port: number }, options: { delayMs?: number } = {}): Promise<PgProxy> {
  const delayMs = options.delayMs ?? 0;
  let log: string[] = [];
  const sockets = new Set<Socket>();
  let cut = false;
  const server: Server = createServer((client) => {
    const upstream = new Socket();
    sockets.add(client).add(upstream);
    // A paused socket is not read: its bytes wait in the kernel, as a dropped packet waits for its retransmission.
    if (cut) {
      client.pause();
      upstream.pause();
    }
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    upstream.connect(target.port, target.host);
    const toServer = delayed(upstream, delayMs);
    const toClient = delayed(client, delayMs);
    // Whose turn it was last: an exchange begins when the client speaks after the server (a query, not set-up).
    let serverSpoke = true;
    let ready = false;
    client.on('data', (chunk: Buffer) => {
      if (serverSpoke && ready) {
        const statement = statementIn(chunk);
        if (statement !== undefined) log.push(statement);
      }
      serverSpoke = false;
      toServer(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      serverSpoke = true;
      // ReadyForQuery ('Z') ends set-up: from then on, the client's turns are round trips.
      if (!ready && chunk.includes(Buffer.from([0x5a, 0, 0, 0, 5]))) ready = true;
      toClient(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', end).on('error', end);
    upstream.on('close', end).on('error', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    urlFor(url) {
      const copy = new URL(url);
      copy.hostname = '127.0.0.1';
      copy.port = String(port);
      return copy.href;
    },
    exchanges: () => [...log],
    reset() {
      log = [];
    },
    cut() {
      cut = true;
      for (const socket of sockets) socket.pause();
    },
    heal() {
      cut = false;
      for (const socket of sockets) socket.resume();
    },
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
