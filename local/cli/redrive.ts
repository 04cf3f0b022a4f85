/**
 * `ratchet redrive`: lists or re-drives the effects dead letters of the
 * running Ratchet, in order.
 *
 *   ratchet redrive --list                    # what is dead-lettered
 *   ratchet redrive                           # re-queue every dead letter, each operation in version order
 *   ratchet redrive --name batches/123        # only this operation
 *   ratchet redrive --skip batches/123#2      # drop this one (never to be delivered), re-queue the rest
 *
 * It asks the running `ratchet start` (RATCHET_URL, default
 * http://127.0.0.1:3000), which owns the data folder. A deployed stack's dead
 * letters are `ratchet-aws redrive --stack NAME`'s (lib/cli/redrive.ts).
 */
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { deadLetterLines, type RedriveOptions, redriveReportLines } from '../../app/effects/redrive.ts';
import { networkFailureInWords } from '../../core/network.ts';
import { tokenForCommands } from '../access/api-token.ts';
import { ratchetUrl } from './ratchet-url.ts';

const command = {
  name: 'ratchet redrive',
  usage: `usage: ratchet redrive [--list] [--name OPERATION] [--skip NAME#VERSION]
  --list               what is dead-lettered, nothing re-driven
  --name OPERATION     only this operation's dead letters
  --skip NAME#VERSION  drop this one (never to be delivered), re-queue the rest

It asks the running ratchet start (RATCHET_URL, default http://127.0.0.1:3000), with its API token
(RATCHET_API_TOKEN, else the token file of DATA_DIR, default ./.ratchet-data). A deployed stack's:
npx ratchet-aws redrive --stack NAME (@ratchet/cdk).`,
  options: { list: { type: 'boolean' }, name: { type: 'string' }, skip: { type: 'string' }, stack: { type: 'string' } },
} as const;
const { values } = parseCommandLine(command);
const options: RedriveOptions = { ...(values.name && { name: values.name }), ...(values.skip && { skip: values.skip }) };

async function local(): Promise<void> {
  const url = ratchetUrl(command);
  const token = tokenForCommands(process.env);
  const authorization: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
  let response: Response;
  try {
    response = values.list
      ? await fetch(`${url}/effects/dead-letters`, { headers: authorization })
      : await fetch(`${url}/effects/redrive`, {
          method: 'POST',
          body: JSON.stringify(options),
          headers: { 'content-type': 'application/json', ...authorization },
        });
  } catch (error) {
    throw new Error(`cannot reach ${url}: ${networkFailureInWords(error)}; start it with ratchet start (or set RATCHET_URL)`);
  }
  if (response.status === 401)
    throw new Error(`${url} refused the API token: set RATCHET_API_TOKEN, or DATA_DIR to the data folder of the Ratchet there`);
  // biome-ignore lint/suspicious/noExplicitAny: the runtime's own JSON, shaped by the route
  const body = (await response.json()) as any;
  if (!response.ok) throw new Error(`${response.status}: ${JSON.stringify(body)}`);
  const lines = values.list ? deadLetterLines(body.deadLetters, body.undecodable) : redriveReportLines(body);
  for (const line of lines) console.log(line);
}

if (values.stack)
  usageError(
    command,
    `--stack is ratchet-aws's: npx ratchet-aws redrive --stack ${values.stack} (@ratchet/cdk; in this repository npm run aws -- redrive --stack ${values.stack})`,
  );
try {
  await local();
} catch (error) {
  failure(command, (error as Error).message);
}
