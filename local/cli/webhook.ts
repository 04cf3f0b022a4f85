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
import { DEV_SECRET_FILE, readDataFolderFile } from '../engine/data-folder.ts';
import { failure, parseCommandLine, usageError } from './command-line.ts';
import { postSignedWebhook } from './signed-webhook.ts';

const command = {
  name: 'ratchet webhook',
  usage: `usage: [WEBHOOK_SIGNING_SECRETS=whsec_…] [RATCHET_URL=http://127.0.0.1:3000] ratchet webhook <type> <id> [options]
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
const secret = process.env.WEBHOOK_SIGNING_SECRETS?.split(/[\s,]+/).find(Boolean) ?? readDataFolderFile(process.env, DEV_SECRET_FILE);
if (!secret) usageError(command, 'WEBHOOK_SIGNING_SECRETS is not set, and DATA_DIR (default ./.ratchet-data) holds no development secret');
let extra: Record<string, unknown> = {};
if (values.data) {
  try {
    extra = JSON.parse(values.data);
  } catch (error) {
    usageError(command, `--data is not JSON: ${(error as Error).message}`);
  }
  if (typeof extra !== 'object' || extra === null || Array.isArray(extra)) usageError(command, '--data must be a JSON object');
}

const url = `${process.env.RATCHET_URL ?? `http://${process.env.HOST ?? '127.0.0.1'}:${process.env.PORT ?? 3000}`}/webhooks/gemini`;
const data = { id, ...(values['update-time'] && { update_time: values['update-time'] }), ...extra };
const body = JSON.stringify({ type, version: 'v1', timestamp: values.timestamp ?? new Date().toISOString(), data });
const messageId = values.id ?? `msg_${randomUUID()}`;
let response: Response;
try {
  response = await postSignedWebhook(url, secret, messageId, body);
} catch (error) {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  const why = cause?.code ?? cause?.message ?? (error as Error).message;
  failure(command, `cannot reach ${url} (${why}): is Ratchet running there?`);
}
console.log(`${response.status} ${await response.text()}  (webhook-id ${messageId})`);
process.exit(response.ok ? 0 : 1);
