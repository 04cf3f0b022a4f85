/**
 * An application that uses Ratchet as a library on PostgreSQL and does its
 * work from a cron's tick, in a loop (test/e2e/library-kill.test.ts): each
 * change's row written by `onChange` in the delivery's transaction, then a
 * pause inside it, so that a `kill -9` lands inside open transactions.
 * Usage: DATABASE_URL=… DATABASE_SCHEMA=… WEBHOOK_SIGNING_SECRETS=… tsx library-worker.ts <table>
 */
import { createRatchet } from '../../local/library.ts';

const table = process.argv[2] as string;
const ratchet = createRatchet({
  onChange: async (change, { sql }) => {
    await sql?.(`INSERT INTO ${table} (id) VALUES ($1)`, [change.id]);
    await new Promise((resolve) => setTimeout(resolve, 50));
  },
});
await ratchet.ready();
console.log('worker ready');
for (;;) {
  const { effects } = await ratchet.tick({ budgetMs: 1_000 });
  if (effects > 0) console.log(`delivered ${effects}`);
  else await new Promise((resolve) => setTimeout(resolve, 50));
}
