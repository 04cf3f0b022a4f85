/**
 * Where the command-line tools find a running Ratchet: RATCHET_URL, else
 * `http://HOST:PORT` (the defaults `npm start` listens on). A RATCHET_URL that
 * is not an http(s) URL is bad usage, said as such, not "unreachable".
 */
import { usageError } from '../../app/command-line.ts';

export function ratchetUrl(command: { name: string; usage: string }, env: NodeJS.ProcessEnv = process.env): string {
  const given = env.RATCHET_URL?.trim();
  if (!given) return `http://${env.HOST || '127.0.0.1'}:${env.PORT || 3000}`;
  let url: URL | undefined;
  try {
    url = new URL(given);
  } catch {}
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    usageError(command, `RATCHET_URL must be an http(s) URL such as http://127.0.0.1:3000, not ${JSON.stringify(given)}`);
  return given.replace(/\/+$/, '');
}
