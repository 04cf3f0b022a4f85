/**
 * `npm run webhook -- <type> <id> [options]`: sends one signed Gemini-style
 * delivery to a running Ratchet, to try it by hand. Exits 0 on a 2xx answer,
 * 1 on any other answer or when Ratchet cannot be reached, 2 on bad usage.
 *
 *   npm run webhook -- batch.succeeded batches/123                   # signed with DATA_DIR's development secret
 *   WEBHOOK_SIGNING_SECRETS=whsec_… npm run webhook -- batch.succeeded batches/123
 *   npm run webhook -- batch.succeeded batches/123 --id msg_1        # again with --id msg_1: a duplicate
 *   npm run webhook -- interaction.requires_action interactions/9 --update-time 2026-11-30T10:00:00Z
 *   npm run webhook -- batch.failed batches/7 --data '{"error":{"code":13,"message":"boom"}}'
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { InvalidSecretError, parseSigningSecrets } from '../../app/signing-secrets.ts';
import { WEBHOOK_EVENT_TYPES } from '../../core/gemini-webhook.ts';
import { networkFailureInWords } from '../../core/network.ts';
import { DEFAULT_DATA_DIR, DEV_SECRET_FILE, readDataFolderFile } from '../../engines/sqlite/index.ts';
import { ratchetUrl } from './ratchet-url.ts';
import { postSignedWebhook } from './signed-webhook.ts';

/** The types Gemini sends that Ratchet maps, and Gemini's ping (acknowledged, changing nothing). */
const EVENT_TYPES = [...Object.keys(WEBHOOK_EVENT_TYPES), 'webhook.ping'];

const command = {
  name: 'ratchet webhook',
  usage: `usage: [WEBHOOK_SIGNING_SECRETS=whsec_…] [RATCHET_URL=http://127.0.0.1:3000] ratchet webhook <type> <id> [options]
  <type>: ${EVENT_TYPES.join(', ')}
  <id>: the job, as Gemini names it (batches/123, batch_123, interactions/v1_…)
  signs with WEBHOOK_SIGNING_SECRETS, else the development secret of DATA_DIR (default ./.ratchet-data)
  --id <webhook-id>         the delivery id (default: a new one; repeat one to send a duplicate)
  --update-time <RFC 3339>  data.update_time, the event's own time
  --timestamp <RFC 3339>    the envelope's timestamp (default: now)
  --data '<json object>'    more fields for data (error, output_file_uri, user_metadata, …)`,
  options: {
    id: { type: 'string' },
    'update-time': { type: 'string' },
    timestamp: { type: 'string' },
    data: { type: 'string' },
  },
  positionals: { min: 2, max: 2 },
} as const;

const { values, positionals } = parseCommandLine(command);
const [type, id] = positionals as [string, string];
if (!EVENT_TYPES.includes(type)) usageError(command, `unknown event type ${JSON.stringify(type)}: one of ${EVENT_TYPES.join(', ')}`);
const url = `${ratchetUrl(command)}/webhooks/gemini`;
// Where the secret comes from, said again when the server refuses the signature (another Ratchet, another secret).
const devSecretFile = join(process.env.DATA_DIR || DEFAULT_DATA_DIR, DEV_SECRET_FILE);
const [secret, source] = process.env.WEBHOOK_SIGNING_SECRETS?.trim()
  ? [process.env.WEBHOOK_SIGNING_SECRETS, 'WEBHOOK_SIGNING_SECRETS']
  : [readDataFolderFile(process.env, DEV_SECRET_FILE), `the development secret in ${devSecretFile}`];
if (!secret)
  usageError(command, `WEBHOOK_SIGNING_SECRETS is not set, and ${devSecretFile} holds no development secret (start Ratchet once)`);
let signing: string;
try {
  [signing] = parseSigningSecrets(secret, { variable: source === 'WEBHOOK_SIGNING_SECRETS' ? source : devSecretFile }) as [string];
} catch (error) {
  if (!(error instanceof InvalidSecretError)) throw error;
  usageError(command, error.message);
}
let extra: Record<string, unknown> = {};
if (values.data) {
  try {
    extra = JSON.parse(values.data);
  } catch (error) {
    usageError(command, `--data is not JSON: ${(error as Error).message}`);
  }
  if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) usageError(command, '--data must be a JSON object');
}

const data = { id, ...(values['update-time'] && { update_time: values['update-time'] }), ...extra };
const body = JSON.stringify({ type, version: 'v1', timestamp: values.timestamp ?? new Date().toISOString(), data });
const messageId = values.id ?? `msg_${randomUUID()}`;
let response: Response;
try {
  response = await postSignedWebhook(url, signing, messageId, body);
} catch (error) {
  failure(command, `cannot reach ${url}: ${networkFailureInWords(error)}; is Ratchet running there? (RATCHET_URL says where)`);
}
console.log(`${response.status} ${await response.text()}  (webhook-id ${messageId})`);
if (response.status === 401)
  console.error(
    `${command.name}: ${url} refused the signature: it was signed with ${source}; the Ratchet there accepts another secret (its WEBHOOK_SIGNING_SECRETS, or its own data folder's development secret)`,
  );
process.exit(response.ok ? 0 : 1);
