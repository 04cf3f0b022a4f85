/** The signed outbound webhook sink (loaded by the effects Lambda only when the webhook is configured). */
import { STATUS_CODES } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { networkFailureInWords } from '../../core/network.ts';
import { type Config, ConfigError } from '../config.ts';
import { InvalidSecretError, parseSigningSecrets } from '../signing-secrets.ts';
import { type EffectSink, SinkError, WEBHOOK_SINK } from './sinks.ts';
import { effectEvent, idempotencyKey, type Transition } from './transition.ts';

/** One POST of a signed effect; resolves with the answer's status, rejects when none came (a timeout included). */
export type Post = (request: { headers: Record<string, string>; body: string; timeoutMs: number; signal?: AbortSignal }) => Promise<{
  status: number;
}>;

export interface WebhookSinkOptions {
  timeoutMs?: number;
  clock?: () => Date;
  /** How the POST is sent: default `fetch` (in Lambda); the embedded engine passes a keep-alive pool (app/effects/pooled-post.ts). */
  post?: Post;
}

/**
 * The outbound Standard Webhook: `webhook-id: <name>#<version>`, the same on
 * every retry. One attempt per call (the effects queue retries with backoff).
 * Only a 2xx is a delivery: a redirect is not followed (a POST that became a
 * GET elsewhere proves nothing) and counts as a failure; 410 Gone is permanent.
 */
export class WebhookSink implements EffectSink {
  readonly name = WEBHOOK_SINK;
  private readonly signer: Webhook;

  constructor(
    private readonly url: string,
    secret: string,
    private readonly options: WebhookSinkOptions = {},
  ) {
    this.signer = new Webhook(secret);
  }

  async deliver(transition: Transition, signal?: AbortSignal): Promise<void> {
    const { timeoutMs = 5_000, clock = () => new Date(), post = this.fetchPost } = this.options;
    const id = idempotencyKey(transition);
    const body = JSON.stringify(effectEvent(transition));
    const now = clock();
    const headers = {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
      'webhook-signature': this.signer.sign(id, now, body),
    };
    let response: { status: number };
    try {
      response = await post({ headers, body, timeoutMs, ...(signal && { signal }) });
    } catch (error) {
      const outcome = signal?.aborted
        ? `stopped: ${String(signal.reason?.message ?? signal.reason)}`
        : networkFailureInWords(error, timeoutMs);
      throw new SinkError(`webhook ${id} not delivered: ${outcome}`, { outcome });
    }
    if (response.status >= 200 && response.status < 300) return;
    const redirect = response.status >= 300 && response.status < 400 ? ' (redirects are not followed)' : '';
    const outcome = `answered ${response.status}${STATUS_CODES[response.status] ? ` ${STATUS_CODES[response.status]}` : ''}${redirect}`;
    throw new SinkError(`webhook ${id} not delivered: ${outcome}`, { permanent: response.status === 410, outcome });
  }

  private readonly fetchPost: Post = async ({ headers, body, timeoutMs, signal }) => {
    const timeout = AbortSignal.timeout(timeoutMs);
    const response = await fetch(this.url, {
      method: 'POST',
      body,
      redirect: 'manual',
      headers,
      signal: signal ? AbortSignal.any([timeout, signal]) : timeout,
    });
    await response.arrayBuffer().catch(() => undefined);
    return { status: response.status };
  };
}

/** The outbound webhook as configured, resolved once at a composition root: its URL and the secret it signs with, decoded. */
export interface WebhookSinkSettings {
  url: string;
  /** The first of EFFECTS_SIGNING_SECRET's secrets (during a rotation the receiver accepts both). */
  secret: string;
  timeoutMs: number;
  connections: number;
}

/**
 * EFFECTS_WEBHOOK_URL and EFFECTS_SIGNING_SECRET, resolved: undefined when the
 * sink is off (no URL), else its settings, or ConfigError naming the variable
 * (never the value). The one place the effects secret is parsed. `skipInvalid`
 * (AWS, where the value is read at run time from Secrets Manager) signs with
 * the first secret that decodes rather than refusing the whole value.
 */
export function webhookSinkSettingsOf(
  config: Pick<Config, 'EFFECTS_WEBHOOK_URL' | 'EFFECTS_SIGNING_SECRET' | 'EFFECTS_WEBHOOK_TIMEOUT_MS' | 'EFFECTS_WEBHOOK_CONNECTIONS'>,
  options: { skipInvalid?: boolean } = {},
): WebhookSinkSettings | undefined {
  const url = config.EFFECTS_WEBHOOK_URL;
  if (!url) return undefined;
  if (!config.EFFECTS_SIGNING_SECRET)
    throw new ConfigError(
      'EFFECTS_WEBHOOK_URL needs EFFECTS_SIGNING_SECRET: the whsec_<base64> secret the receiver verifies effects with',
      'EFFECTS_SIGNING_SECRET',
    );
  const secret = effectsSigningSecretOf(config.EFFECTS_SIGNING_SECRET, options);
  return { url, secret, timeoutMs: config.EFFECTS_WEBHOOK_TIMEOUT_MS, connections: config.EFFECTS_WEBHOOK_CONNECTIONS };
}

/** EFFECTS_SIGNING_SECRET's value decoded: the secret the sink signs with, or ConfigError naming the variable. */
export function effectsSigningSecretOf(value: string, options: { skipInvalid?: boolean } = {}): string {
  try {
    const [secret] = parseSigningSecrets(value, {
      variable: 'EFFECTS_SIGNING_SECRET',
      ...(options.skipInvalid && { onInvalid: () => {} }),
    });
    return secret as string;
  } catch (error) {
    if (error instanceof InvalidSecretError) throw new ConfigError(error.message, 'EFFECTS_SIGNING_SECRET');
    throw error;
  }
}
