/** The signed outbound webhook sink (loaded by the effects Lambda only when the webhook is configured). */
import { Webhook } from 'standardwebhooks';
import { type EffectSink, SinkError } from './sinks.ts';
import { idempotencyKey, stateChangedEvent, type Transition } from './transition.ts';

export interface WebhookSinkOptions {
  timeoutMs?: number;
  clock?: () => Date;
}

/**
 * The outbound Standard Webhook: `webhook-id: <name>#<version>`, the same on
 * every retry. One attempt per call (the effects queue retries with backoff).
 * Only a 2xx is a delivery: a redirect is not followed (a POST that became a
 * GET elsewhere proves nothing) and counts as a failure; 410 Gone is permanent.
 */
export class WebhookSink implements EffectSink {
  readonly name = 'webhook';
  private readonly signer: Webhook;

  constructor(
    private readonly url: string,
    secret: string,
    private readonly options: WebhookSinkOptions = {},
  ) {
    this.signer = new Webhook(secret);
  }

  async deliver(transition: Transition): Promise<void> {
    const { timeoutMs = 5_000, clock = () => new Date() } = this.options;
    const id = idempotencyKey(transition);
    const body = JSON.stringify(stateChangedEvent(transition));
    const now = clock();
    let response: Response;
    try {
      response = await fetch(this.url, {
        method: 'POST',
        body,
        redirect: 'manual',
        headers: {
          'content-type': 'application/json',
          'webhook-id': id,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': this.signer.sign(id, now, body),
        },
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.arrayBuffer().catch(() => undefined);
    } catch (error) {
      const reason = (error as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (error as Error).message;
      throw new SinkError(`webhook ${id} not delivered: ${reason}`);
    }
    if (response.status >= 200 && response.status < 300) return;
    const redirect = response.status >= 300 && response.status < 400 ? ' (redirects are not followed)' : '';
    throw new SinkError(`webhook ${id} not delivered: answered ${response.status}${redirect}`, { permanent: response.status === 410 });
  }
}
