/**
 * `ratchet login`: a new one-time link that signs the console in, from the
 * Ratchet running at RATCHET_URL (default http://127.0.0.1:3000), asked for
 * with its API token (RATCHET_API_TOKEN, else the token file of DATA_DIR).
 * The link Ratchet prints at start works once, within 15 minutes; this one too.
 */

import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { networkFailureInWords } from '../../core/network.ts';
import { tokenForCommands } from '../access/api-token.ts';
import { ratchetUrl } from './ratchet-url.ts';

const command = {
  name: 'ratchet login',
  usage: `usage: [RATCHET_URL=http://127.0.0.1:3000] [RATCHET_API_TOKEN=…] ratchet login [--next <path>]
  prints a new one-time link that signs the console in (once, within 15 minutes)
  asks the Ratchet at RATCHET_URL with its API token (RATCHET_API_TOKEN, else DATA_DIR's api-token file)
  --next <path>   the console page the link opens (default /)`,
  options: { next: { type: 'string' } },
} as const;

const { values } = parseCommandLine(command);
const url = ratchetUrl(command);
const token = tokenForCommands(process.env);
if (!token) usageError(command, 'no API token: set RATCHET_API_TOKEN, or DATA_DIR to the data folder of the Ratchet there');
let response: Response;
try {
  const next = values.next ? `?${new URLSearchParams({ next: values.next })}` : '';
  response = await fetch(`${url}/login/link${next}`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
} catch (error) {
  failure(command, `cannot reach ${url}: ${networkFailureInWords(error)}; is Ratchet running there? (RATCHET_URL says where)`);
}
if (response.status === 401)
  failure(command, `${url} refused the API token: set RATCHET_API_TOKEN, or DATA_DIR to the data folder of the Ratchet there`);
if (!response.ok) failure(command, `${url} answered ${response.status}: ${(await response.text()).slice(0, 200)}`);
const { link } = (await response.json()) as { link: string };
console.log(`Console: ${link} (signs in once, within 15 minutes)`);
