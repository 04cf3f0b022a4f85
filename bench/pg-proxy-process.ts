/**
 * The database a zone away, as a process of its own (forked by
 * bench/postgres-distance.ts): test/support/pg-proxy.ts in front of the
 * server, every chunk held `delayMs` each way. Its CPU is the network's, not
 * counted with either system. Asked by message for the statements it saw
 * since the last ask (`take`), it answers them and starts counting anew.
 */
import { startPgProxy } from '../test/support/pg-proxy.ts';

const [host, port, delayMs] = process.argv.slice(2);
const proxy = await startPgProxy({ host: host as string, port: Number(port) }, { delayMs: Number(delayMs) });
process.send?.({ port: proxy.port });
process.on('message', () => {
  const statements = proxy.exchanges();
  proxy.reset();
  process.send?.({ statements });
});
process.on('disconnect', () => process.exit(0));
