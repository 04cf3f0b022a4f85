/** Where effects go. Each sink throws when a delivery did not succeed. */
import { type EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { Webhook } from 'standardwebhooks';
import { idempotencyKey, stateChangedEvent, type Transition } from './transition.ts';

export interface EffectSink {
  /** Names the sink in the ledger: changing it re-delivers everything. */
  readonly name: string;
  deliver(transition: Transition): Promise<void>;
}

export class SinkError extends Error {
  override name = 'SinkError';
}

export interface WebhookSinkOptions {
  timeoutMs?: number;
  /** Tries per delivery inside one invocation; the stream mapping retries the record after that. */
  attempts?: number;
  backoffMs?: number;
  clock?: () => Date;
}

/** The outbound Standard Webhook: `webhook-id: <name>#<version>`, the same on every retry. */
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
    const { timeoutMs = 5_000, attempts = 3, backoffMs = 200, clock = () => new Date() } = this.options;
    const id = idempotencyKey(transition);
    const body = JSON.stringify(stateChangedEvent(transition));
    let failure = '';
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) await new Promise((resolve) => setTimeout(resolve, backoffMs * 2 ** (attempt - 2)));
      const now = clock();
      try {
        const response = await fetch(this.url, {
          method: 'POST',
          body,
          headers: {
            'content-type': 'application/json',
            'webhook-id': id,
            'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
            'webhook-signature': this.signer.sign(id, now, body),
          },
          signal: AbortSignal.timeout(timeoutMs),
        });
        await response.arrayBuffer().catch(() => undefined);
        if (response.ok) return;
        failure = `answered ${response.status}`;
      } catch (error) {
        failure = (error as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (error as Error).message;
      }
    }
    throw new SinkError(`webhook ${id} not delivered after ${attempts} attempts: ${failure}`);
  }
}

export const EVENTBRIDGE_SOURCE = 'ratchet';
export const EVENTBRIDGE_DETAIL_TYPE = 'Operation State Changed';

export class EventBridgeSink implements EffectSink {
  readonly name = 'eventbridge';

  constructor(
    private readonly client: EventBridgeClient,
    private readonly busName: string,
  ) {}

  async deliver(transition: Transition): Promise<void> {
    const { data } = stateChangedEvent(transition);
    const result = await this.client.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: this.busName,
            Source: EVENTBRIDGE_SOURCE,
            DetailType: EVENTBRIDGE_DETAIL_TYPE,
            Detail: JSON.stringify({ ...data, idempotencyKey: idempotencyKey(transition) }),
            Time: new Date(transition.recordedAt),
          },
        ],
      }),
    );
    if (result.FailedEntryCount) throw new SinkError(`PutEvents failed: ${result.Entries?.[0]?.ErrorCode ?? 'unknown'}`);
  }
}
