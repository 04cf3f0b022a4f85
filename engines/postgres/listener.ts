/**
 * Wake-ups between instances: after its commits an instance sends one
 * `NOTIFY` (at most every few milliseconds, outside the write's transaction,
 * so writes never queue on the notify lock), and each instance `LISTEN`s on a
 * connection of its own, when it has one that keeps session state: a direct
 * URL (DATABASE_LISTEN_URL, else DATABASE_URL). Through a transaction pooler a
 * LISTEN hears nothing, and the feed's and the effects queue's short polls are
 * what wake them; a listener that loses its connection connects again.
 *
 * A LISTEN connection sends nothing of its own, so a network that went silent
 * (packets dropped, nothing closed) would leave it waiting forever: it is
 * pinged every few seconds, and one ping unanswered within the statement
 * timeout drops it (TCP keepalive does the same below, where the peer is
 * truly gone); it then connects again.
 */
import pg from 'pg';
import { connectionLimits, DEFAULT_TIMEOUTS, hangUp, type Postgres, type Timeouts, verifiedFull } from './database.ts';

/** The `application_name` of the listening connection (it never writes: the feed's horizon passes it over). */
const LISTENER = 'ratchet listener';

/** How often the LISTEN connection is asked whether it is still there. */
const PING_MS = 5_000;
/** The longest wait between two attempts to connect again. */
const RETRY_MAX_MS = 5_000;

/** The notify channel of a schema's instances. */
export const channelOf = (schema: string) => `ratchet_${schema}`;

/** Sends one NOTIFY after a burst of commits (at most every `everyMs`). */
export function notifier(db: Postgres, everyMs = 5): () => void {
  let pending = false;
  return () => {
    if (pending) return;
    pending = true;
    setTimeout(() => {
      pending = false;
      db.run('SELECT pg_notify($1, $2)', [channelOf(db.schema), '']).catch(() => undefined);
    }, everyMs).unref();
  };
}

export interface Listener {
  close(): Promise<void>;
}

/** Calls `onNotice` on each NOTIFY of the schema's channel, from a connection of its own to `url`. */
export function listen(
  url: string,
  schema: string,
  onNotice: () => void,
  onError: (error: Error) => void,
  timeouts: Timeouts = DEFAULT_TIMEOUTS,
): Listener {
  let client: pg.Client | undefined;
  let closed = false;
  let retryMs = 500;
  let timer: NodeJS.Timeout | undefined;
  let pinging = false;
  const connect = async () => {
    if (closed) return;
    const next = new pg.Client({ connectionString: verifiedFull(new URL(url)), application_name: LISTENER, ...connectionLimits(timeouts) });
    next.on('notification', () => onNotice());
    next.on('error', (error) => {
      onError(error);
      reconnect();
    });
    try {
      await next.connect();
      await next.query(`LISTEN "${channelOf(schema)}"`);
      client = next;
      retryMs = 500;
      // Whatever was committed while it was away: the waiters read again.
      onNotice();
    } catch (error) {
      onError(error as Error);
      void hangUp(next);
      reconnect();
    }
  };
  const reconnect = () => {
    // A connection that may be dead: its server is not waited on.
    if (client) void hangUp(client);
    client = undefined;
    if (closed || timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void connect();
    }, retryMs);
    timer.unref();
    retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
  };
  const ping = setInterval(() => {
    const pinged = client;
    if (!pinged || pinging) return;
    pinging = true;
    pinged
      .query('SELECT 1')
      .catch((error: Error) => {
        if (pinged !== client) return;
        onError(error);
        reconnect();
      })
      .finally(() => {
        pinging = false;
      });
  }, PING_MS);
  ping.unref();
  void connect();
  return {
    close: async () => {
      closed = true;
      clearTimeout(timer);
      clearInterval(ping);
      if (client) await hangUp(client, 1_000);
    },
  };
}
