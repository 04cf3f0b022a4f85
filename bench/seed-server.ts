/**
 * The seed receiver as a process of its own, as the systems it is measured
 * against run: `node --import tsx bench/seed-server.ts sqlite <file>` (the
 * seed on SQLite), `… postgres <url> <table>` (on PostgreSQL) or `… floor`
 * (verify the signature, answer 200). The secret
 * comes from BENCH_SECRET; prints `listening <url>`.
 */

import { Sqlite } from '../engines/sqlite/sqlite.ts';
import { PostgresSeedStore, SeedBaseline, SqliteSeedStore } from './seed-baseline.ts';

const [mode, where, table] = process.argv.slice(2);
const secret = process.env.BENCH_SECRET as string;
const store =
  mode === 'sqlite'
    ? new SqliteSeedStore(Sqlite.open(where as string))
    : mode === 'postgres'
      ? await PostgresSeedStore.open(where as string, table as string)
      : undefined;
const seed = await new SeedBaseline(store, secret).start();
console.log(`listening ${seed.url}`);
process.on('SIGTERM', () => void seed.stop().then(() => process.exit(0)));
