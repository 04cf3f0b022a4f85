/**
 * What `npm run connect` does, with its ports passed in (the CLI in
 * connect.ts wires the AWS SDK and @google/genai; tests wire fakes of both):
 * register the deployed webhook URL with Gemini, keep Gemini's signing secret,
 * the API key and the outbound webhook's settings in the stack's secrets, then
 * prove it with Gemini's ping. Every step first looks at what is there, so a
 * second run changes nothing that is already right.
 */
import { randomBytes } from 'node:crypto';
import { configuredValue, NOT_CONFIGURED } from '../../app/not-configured.ts';
import type { DeliveryReceipts } from '../../app/ports.ts';
import { SUBSCRIBED_EVENTS } from '../../providers/gemini/webhook.ts';

/** The stack outputs connect reads (lib/ratchet-stack.ts). */
export const CONNECT_OUTPUTS = [
  'WebhookUrl',
  'WebhookSigningSecretArn',
  'GeminiApiKeySecretArn',
  'EffectsWebhookUrlSecretArn',
  'EffectsSigningSecretArn',
  'TableName',
] as const;
export type StackOutputs = Record<(typeof CONNECT_OUTPUTS)[number], string>;

/** Gemini keeps a rotated-out signing secret valid this long (`revoke_previous_secrets_after_h24`). */
export const ROTATION_GRACE_MS = 24 * 3_600_000;

export interface SecretStore {
  /** The current value and when it was stored. */
  get(arn: string): Promise<{ value: string; storedAt: Date }>;
  put(arn: string, value: string): Promise<void>;
}

/** The part of `ai.webhooks` (@google/genai) connect uses, in the SDK's own shapes. */
export interface GeminiWebhooks {
  list(params?: { page_token?: string }): Promise<{ webhooks?: GeminiWebhook[]; next_page_token?: string }>;
  create(params: { name?: string; uri: string; subscribed_events: string[] }): Promise<GeminiWebhook & { new_signing_secret?: string }>;
  update(id: string, params: { subscribed_events?: string[]; state?: string; update_mask?: string }): Promise<GeminiWebhook>;
  ping(id: string): Promise<unknown>;
  rotateSigningSecret(id: string, params: { revocation_behavior?: string }): Promise<{ secret?: string }>;
}
export interface GeminiWebhook {
  id?: string;
  uri: string;
  subscribed_events: string[];
  state?: string;
}

export interface ConnectOptions {
  stack: string;
  dryRun?: boolean;
  /** Rotate the signing secret, keeping the previous one accepted for Gemini's 24 h grace. */
  rotate?: boolean;
  /** Turn the outbound webhook on at this URL (`off`: turn it off). */
  effectsUrl?: string;
  /** How long to wait for the ping to reach Ratchet. */
  waitSeconds?: number;
}

export interface ConnectDeps {
  outputs: StackOutputs;
  apiKey: string;
  secrets: SecretStore;
  gemini: GeminiWebhooks;
  receipts: Pick<DeliveryReceipts, 'lastUnmapped'>;
  log: (line: string) => void;
  now?: () => Date;
  sleep?: (ms: number) => Promise<void>;
}

export class ConnectError extends Error {
  override name = 'ConnectError';
}

/** Runs every step; resolves when the ping reached Ratchet (or, in a dry run, when the plan is printed). */
export async function connect(options: ConnectOptions, deps: ConnectDeps): Promise<void> {
  const { outputs, secrets, gemini, log } = deps;
  const now = deps.now ?? (() => new Date());
  const would = options.dryRun ? 'would ' : '';
  const write = async (arn: string, value: string) => {
    if (!options.dryRun) await secrets.put(arn, value);
  };
  log(`stack ${options.stack}: webhook URL ${outputs.WebhookUrl}`);

  // The key first proves itself: listing the webhooks fails on a key Gemini refuses.
  const webhook = await findWebhook(gemini, outputs.WebhookUrl);
  const storedKey = configuredValue((await secrets.get(outputs.GeminiApiKeySecretArn)).value);
  if (storedKey === deps.apiKey) log('Gemini API key: already stored');
  else {
    await write(outputs.GeminiApiKeySecretArn, deps.apiKey);
    log(`Gemini API key: ${would}store it (reconcile reads it within 5 minutes)`);
  }

  const stored = await secrets.get(outputs.WebhookSigningSecretArn);
  const storedSecrets = configuredValue(stored.value)?.split(/[\s,]+/) ?? [];
  let id: string | undefined;
  if (!webhook) {
    log(`Gemini webhook: ${would}create it, subscribed to ${SUBSCRIBED_EVENTS.join(', ')}`);
  }
  if (!webhook && !options.dryRun) {
    const created = await gemini.create({
      name: `ratchet-${options.stack}`,
      uri: outputs.WebhookUrl,
      subscribed_events: [...SUBSCRIBED_EVENTS],
    });
    if (!created.id || !created.new_signing_secret)
      throw new ConnectError('Gemini created the webhook but returned no id or signing secret');
    id = created.id;
    await storeShownOnce(secrets, outputs.WebhookSigningSecretArn, created.new_signing_secret, options.stack);
    log(`Gemini webhook ${id}: created; its signing secret (shown once) is stored`);
  } else if (webhook) {
    id = webhook.id as string;
    await updateWebhook(gemini, webhook, { dryRun: options.dryRun, log });
    if (storedSecrets.length === 0 || options.rotate) {
      // Without a stored secret nobody holds the current one: revoke it at once. A rotation keeps the old one for 24 h.
      const grace = storedSecrets.length > 0;
      log(
        grace
          ? `signing secret: ${would}rotate it; the previous one stays accepted for 24 h`
          : `signing secret: none stored, and Gemini shows it only at creation: ${would}rotate it, revoking the unknown one`,
      );
      if (!options.dryRun) {
        const { secret } = await gemini.rotateSigningSecret(id, {
          revocation_behavior: grace ? 'revoke_previous_secrets_after_h24' : 'revoke_previous_secrets_immediately',
        });
        if (!secret) throw new ConnectError('Gemini rotated the signing secret but returned none');
        await storeShownOnce(secrets, outputs.WebhookSigningSecretArn, [secret, ...(grace ? storedSecrets : [])].join(' '), options.stack);
      }
    } else if (storedSecrets.length > 1 && now().getTime() - stored.storedAt.getTime() > ROTATION_GRACE_MS) {
      const [newest] = storedSecrets as [string];
      await write(outputs.WebhookSigningSecretArn, newest);
      log(`signing secret: ${would}drop the previous one (its 24 h grace is over)`);
    } else {
      log(`signing secret: stored (${storedSecrets.length === 1 ? 'one' : 'the new and the previous one, in the 24 h grace'})`);
    }
  }

  await configureEffects(options, deps, write, would);

  if (options.dryRun || !id) return log('dry run: nothing was changed');
  await confirmPing(id, options.waitSeconds ?? 60, deps);
}

async function findWebhook(gemini: GeminiWebhooks, uri: string): Promise<GeminiWebhook | undefined> {
  let pageToken: string | undefined;
  const matches: GeminiWebhook[] = [];
  try {
    do {
      const page = await gemini.list(pageToken ? { page_token: pageToken } : {});
      matches.push(...(page.webhooks ?? []).filter((w) => w.uri === uri && w.id));
      pageToken = page.next_page_token || undefined; // "" is no next page
    } while (pageToken);
  } catch (error) {
    throw new ConnectError(`Gemini refused to list webhooks (${geminiError(error)}): is GEMINI_API_KEY right?`);
  }
  return matches[0];
}

async function updateWebhook(
  gemini: GeminiWebhooks,
  webhook: GeminiWebhook,
  { dryRun, log }: { dryRun?: boolean | undefined; log: (line: string) => void },
): Promise<void> {
  const missing = SUBSCRIBED_EVENTS.filter((e) => !webhook.subscribed_events.includes(e));
  const disabled = webhook.state !== undefined && webhook.state !== 'enabled';
  if (missing.length === 0 && !disabled) return log(`Gemini webhook ${webhook.id}: found, subscribed to every event Ratchet maps`);
  const change = {
    ...(missing.length > 0 && { subscribed_events: [...new Set([...webhook.subscribed_events, ...SUBSCRIBED_EVENTS])] }),
    ...(disabled && { state: 'enabled' }),
  };
  const what = [missing.length > 0 && `subscribe to ${missing.join(', ')}`, disabled && `re-enable it (it was ${webhook.state})`];
  log(`Gemini webhook ${webhook.id}: ${dryRun ? 'would ' : ''}${what.filter(Boolean).join(' and ')}`);
  if (!dryRun) await gemini.update(webhook.id as string, { ...change, update_mask: Object.keys(change).join(',') });
}

/** Gemini shows a signing secret once: a failed store must say how to get a new one, never print it. */
async function storeShownOnce(secrets: SecretStore, arn: string, value: string, stack: string): Promise<void> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await secrets.put(arn, value);
    } catch (error) {
      lastError = error;
    }
  }
  throw new ConnectError(
    `could not store the signing secret Gemini just issued (${(lastError as Error).message}); ` +
      `fix access to Secrets Manager, then run npm run connect -- --stack ${stack} again: it issues a new one`,
  );
}

async function configureEffects(
  options: ConnectOptions,
  { outputs, secrets, log }: ConnectDeps,
  write: (arn: string, value: string) => Promise<void>,
  would: string,
): Promise<void> {
  let url = configuredValue((await secrets.get(outputs.EffectsWebhookUrlSecretArn)).value);
  if (options.effectsUrl === 'off') {
    if (url) await write(outputs.EffectsWebhookUrlSecretArn, NOT_CONFIGURED);
    return log(`outbound webhook: ${url ? `${would}turn it off` : 'off'}`);
  }
  if (options.effectsUrl !== undefined && options.effectsUrl !== url) {
    if (!/^https?:\/\//.test(options.effectsUrl) || !URL.canParse(options.effectsUrl)) {
      throw new ConnectError(`--effects-url ${options.effectsUrl} is not an http(s) URL`);
    }
    url = options.effectsUrl;
    await write(outputs.EffectsWebhookUrlSecretArn, url);
    log(`outbound webhook: ${would}send effects to ${new URL(url).origin}/…`);
  }
  if (!url) return log('outbound webhook: off (turn it on with --effects-url https://…)');
  if (configuredValue((await secrets.get(outputs.EffectsSigningSecretArn)).value))
    return log('outbound webhook: on, signing secret stored');
  await write(outputs.EffectsSigningSecretArn, `whsec_${randomBytes(32).toString('base64')}`);
  log(
    `outbound webhook: ${would}generate its signing secret; give it to your receiver with ` +
      `aws secretsmanager get-secret-value --secret-id ${outputs.EffectsSigningSecretArn} --query SecretString --output text`,
  );
}

async function confirmPing(id: string, waitSeconds: number, { gemini, receipts, log, ...deps }: ConnectDeps): Promise<void> {
  const sleep = deps.sleep ?? ((ms: number) => new Promise((resolve) => setTimeout(resolve, ms)));
  const before = (await receipts.lastUnmapped())?.received ?? 0;
  try {
    await gemini.ping(id);
  } catch (error) {
    throw new ConnectError(`Gemini refused the ping (${geminiError(error)})`);
  }
  log(`ping: sent; waiting up to ${waitSeconds} s for Ratchet to verify it`);
  const giveUpAt = Date.now() + waitSeconds * 1000;
  while (Date.now() < giveUpAt) {
    const last = await receipts.lastUnmapped();
    if (last && last.received > before)
      return log(`ping: verified and recorded by Ratchet at ${last.receivedAt} (${last.webhookId}): connected`);
    await sleep(1000);
  }
  throw new ConnectError(
    `no verified delivery reached Ratchet within ${waitSeconds} s. Gemini keeps retrying for 24 h; ` +
      'the API function logs say why it was refused (a new signing secret is read within 10 s)',
  );
}

function geminiError(error: unknown): string {
  const e = error as { status?: number; statusCode?: number; message?: string };
  const status = e.status ?? e.statusCode;
  return status ? `HTTP ${status}` : (e.message ?? String(error));
}
