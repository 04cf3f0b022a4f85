/**
 * The database a zone away, as a process of its own (forked by
 * bench/postgres-distance.ts, one per system so that neither system's load
 * slows the other's network): test/support/pg-proxy.ts in front of the
 * server, every chunk held `delayMs` each way; beside it, in the same
 * process, an undelayed listener the latency probe uses, which shows what
 * the process itself adds under the load it carries. Its CPU is the
 * network's, not counted with either system. Asked by message for the
 * statements the delayed listener saw since the last ask (`take`), it
 * answers them and starts counting anew.
 */
import { startPgProxy } from '../test/support/pg-proxy.ts';

const [host, port, delayMs] = process.argv.slice(2);
const target = { host: host as string, port: Number(port) };
const proxy = await startPgProxy(target, { delayMs: Number(delayMs) });
const undelayed = await startPgProxy(target, { delayMs: 0 });
process.send?.({ port: proxy.port, undelayedPort: undelayed.port });
process.on('message', () => {
  const statements = proxy.exchanges();
  proxy.reset();
  process.send?.({ statements });
});
process.on('disconnect', () => process.exit(0));
