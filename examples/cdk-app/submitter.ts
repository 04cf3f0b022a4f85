/** Tracks a job Ratchet should follow, and reads it back (SigV4 with this function's role). */
import { RatchetClient } from '@ratchet/client';

const ratchet = new RatchetClient({ url: process.env.RATCHET_URL as string });

export const handler = async (event: { name: string }) => {
  const { created } = await ratchet.track(event.name);
  return { created, operation: await ratchet.get(event.name) };
};
