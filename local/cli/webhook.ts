/**
 * `npm run webhook -- <type> <id> [options]`: sends one signed delivery to a
 * running Ratchet, to try it by hand: Gemini's by default, or OpenAI's
 * (`--provider openai`, to /webhooks/openai; `azure-openai` to
 * /webhooks/azure-openai), each in its provider's shape. Exits 0 on a 2xx
 * answer, 1 on any other answer or when Ratchet cannot be reached, 2 on bad usage.
 *
 *   npm run webhook -- batch.succeeded batches/123                   # signed with DATA_DIR's development secret
 *   WEBHOOK_SIGNING_SECRETS=whsec_… npm run webhook -- batch.succeeded batches/123
 *   npm run webhook -- batch.succeeded batches/123 --id msg_1        # again with --id msg_1: a duplicate
 *   npm run webhook -- interaction.requires_action interactions/9 --update-time 2026-11-30T10:00:00Z
 *   npm run webhook -- batch.failed batches/7 --data '{"error":{"code":13,"message":"boom"}}'
 *   OPENAI_WEBHOOK_SECRET=whsec_… npm run webhook -- --provider openai batch.completed batch_abc
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { failure, parseCommandLine, usageError } from '../../app/command-line.ts';
import { InvalidSecretError, parseSigningSecrets } from '../../app/signing-secrets.ts';
import { networkFailureInWords } from '../../core/network.ts';
import { DEFAULT_DATA_DIR, DEV_SECRET_FILE, readDataFolderFile } from '../../engines/sqlite/index.ts';
import { WEBHOOK_EVENT_TYPES } from '../../providers/gemini/webhook.ts';
import { OPENAI_WEBHOOK_TYPES } from '../../providers/openai/events.ts';
import { ratchetUrl } from './ratchet-url.ts';
import { postSignedWebhook } from './signed-webhook.ts';

/** The types Gemini sends that Ratchet maps, and Gemini's ping (acknowledged, changing nothing). */
const GEMINI_TYPES = [...Object.keys(WEBHOOK_EVENT_TYPES), 'webhook.ping'];
const OPENAI_TYPES = Object.keys(OPENAI_WEBHOOK_TYPES);

/** Where each provider's deliveries go, signed with which secret, and which of its types Ratchet reads there. */
const PROVIDERS = {
  gemini: { path: '/webhooks/gemini', secret: 'WEBHOOK_SIGNING_SECRETS', types: GEMINI_TYPES },
  openai: { path: '/webhooks/openai', secret: 'OPENAI_WEBHOOK_SECRET', types: OPENAI_TYPES },
  // An Azure OpenAI resource's jobs Ratchet tracks are its batches.
  'azure-openai': {
    path: '/webhooks/azure-openai',
    secret: 'AZURE_OPENAI_WEBHOOK_SECRET',
    types: OPENAI_TYPES.filter((type) => OPENAI_WEBHOOK_TYPES[type]?.kind === 'openai-batch'),
  },
} as const;
type Provider = keyof typeof PROVIDERS;

const command = {
  name: 'ratchet webhook',
  usage: `usage: [WEBHOOK_SIGNING_SECRETS=whsec_…] [RATCHET_URL=http://127.0.0.1:3000] ratchet webhook [--provider openai] <type> <id> [options]
  <type>: Gemini's: ${GEMINI_TYPES.join(', ')}
          OpenAI's (--provider openai; azure-openai: the batch ones): ${OPENAI_TYPES.join(', ')}
  <id>: the job, as its provider's event names it (batches/123, batch_123, interactions/v1_…; OpenAI: batch_abc, resp_…, ftjob_…,
        an eval run's id, or the job's Ratchet name: openai/batches/batch_abc)
  signs with WEBHOOK_SIGNING_SECRETS, else the development secret of DATA_DIR (default ./.ratchet-data);
  --provider openai with OPENAI_WEBHOOK_SECRET, azure-openai with AZURE_OPENAI_WEBHOOK_SECRET
  --provider <provider>     ${Object.keys(PROVIDERS).join(', ')} (default gemini): the body's shape, the route and the secret
  --id <webhook-id>         the delivery id (default: a new one; repeat one to send a duplicate; OpenAI: the event's id too)
  --update-time <RFC 3339>  the event's own time: Gemini's data.update_time, OpenAI's created_at (whole seconds)
  --timestamp <RFC 3339>    Gemini's envelope timestamp (default: now)
  --data '<json object>'    more fields for data (error, output_file_uri, user_metadata, …)`,
  options: {
    provider: { type: 'string' },
    id: { type: 'string' },
    'update-time': { type: 'string' },
    timestamp: { type: 'string' },
    data: { type: 'string' },
  },
  positionals: { min: 2, max: 2 },
} as const;

const { values, positionals } = parseCommandLine(command);
const [type, id] = positionals as [string, string];
const provider = (values.provider ?? 'gemini') as Provider;
if (!Object.hasOwn(PROVIDERS, provider))
  usageError(command, `unknown provider ${JSON.stringify(values.provider)}: one of ${Object.keys(PROVIDERS).join(', ')}`);
const { path, secret: variable, types } = PROVIDERS[provider];
if (!(types as readonly string[]).includes(type))
  usageError(
    command,
    `unknown event type ${JSON.stringify(type)}${provider === 'gemini' ? '' : ` for ${provider}`}: one of ${types.join(', ')}${
      provider === 'gemini' && OPENAI_TYPES.includes(type) ? ` (${type} is OpenAI's: --provider openai)` : ''
    }`,
  );
if (provider !== 'gemini' && values.timestamp)
  usageError(command, `--timestamp is Gemini's envelope time: ${provider}'s event has created_at alone (--update-time)`);
const url = `${ratchetUrl(command)}${path}`;
// Where the secret comes from, said again when the server refuses the signature (another Ratchet, another secret).
const devSecretFile = join(process.env.DATA_DIR || DEFAULT_DATA_DIR, DEV_SECRET_FILE);
const [secret, source] = process.env[variable]?.trim()
  ? [process.env[variable], variable]
  : provider === 'gemini'
    ? [readDataFolderFile(process.env, DEV_SECRET_FILE), `the development secret in ${devSecretFile}`]
    : [undefined, variable];
if (!secret)
  usageError(
    command,
    provider === 'gemini'
      ? `WEBHOOK_SIGNING_SECRETS is not set, and ${devSecretFile} holds no development secret (start Ratchet once)`
      : `${variable} is not set: give it the secret the Ratchet there has in its own ${variable} (whsec_…)`,
  );
let signing: string;
try {
  [signing] = parseSigningSecrets(secret, { variable: source === variable ? source : devSecretFile }) as [string];
} catch (error) {
  if (!(error instanceof InvalidSecretError)) throw error;
  usageError(command, error.message);
}
let createdAt = Math.floor(Date.now() / 1000);
if (provider !== 'gemini' && values['update-time']) {
  const at = Date.parse(values['update-time']);
  if (Number.isNaN(at)) usageError(command, `--update-time ${JSON.stringify(values['update-time'])} is not an RFC 3339 time`);
  createdAt = Math.floor(at / 1000);
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

const messageId = values.id ?? (provider === 'gemini' ? `msg_${randomUUID()}` : `evt_${randomUUID().replaceAll('-', '')}`);
const body =
  provider === 'gemini'
    ? JSON.stringify({
        type,
        version: 'v1',
        timestamp: values.timestamp ?? new Date().toISOString(),
        data: { id, ...(values['update-time'] && { update_time: values['update-time'] }), ...extra },
      })
    : // OpenAI's event (Azure's alike) names the job by its id alone (a Ratchet name given is cut to it); a retry
      // carries the same event id again.
      JSON.stringify({ id: messageId, object: 'event', created_at: createdAt, type, data: { id: id.split('/').at(-1), ...extra } });
let response: Response;
try {
  response = await postSignedWebhook(url, signing, messageId, body);
} catch (error) {
  failure(command, `cannot reach ${url}: ${networkFailureInWords(error)}; is Ratchet running there? (RATCHET_URL says where)`);
}
console.log(`${response.status} ${await response.text()}  (webhook-id ${messageId})`);
if (response.status === 401)
  console.error(
    `${command.name}: ${url} refused the signature: it was signed with ${source}; the Ratchet there accepts another secret (its ${
      provider === 'gemini' ? "WEBHOOK_SIGNING_SECRETS, or its own data folder's development secret" : variable
    })`,
  );
process.exit(response.ok ? 0 : 1);
