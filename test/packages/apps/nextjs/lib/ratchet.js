// One Ratchet for the app, configured by the environment (DATABASE_URL, WEBHOOK_SIGNING_SECRETS, RATCHET_API_TOKEN…).
import { createRatchet } from '@ratchet/server';

export const ratchet = createRatchet({
  basePath: '/api/ratchet',
  onChange: async (change, { sql }) => {
    await sql('INSERT INTO app_changes (id, name, version, pid) VALUES ($1, $2, $3, $4)', [
      change.id,
      change.data.name,
      change.data.version,
      process.pid,
    ]);
  },
});
