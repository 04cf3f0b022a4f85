/** The AWS sink: each transition as an event on Ratchet's EventBridge bus. */
import { type EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { type EffectSink, SinkError } from '../../app/effects/sinks.ts';
import { effectEvent, idempotencyKey, OVERDUE_TYPE, type Transition } from '../../app/effects/transition.ts';
import { EVENTBRIDGE_DETAIL_TYPE, EVENTBRIDGE_OVERDUE_DETAIL_TYPE, EVENTBRIDGE_SOURCE } from './settings.ts';

export class EventBridgeSink implements EffectSink {
  readonly name = 'eventbridge';

  constructor(
    private readonly client: EventBridgeClient,
    private readonly busName: string,
  ) {}

  async deliver(transition: Transition): Promise<void> {
    const { type, data } = effectEvent(transition);
    const result = await this.client.send(
      new PutEventsCommand({
        Entries: [
          {
            EventBusName: this.busName,
            Source: EVENTBRIDGE_SOURCE,
            DetailType: type === OVERDUE_TYPE ? EVENTBRIDGE_OVERDUE_DETAIL_TYPE : EVENTBRIDGE_DETAIL_TYPE,
            Detail: JSON.stringify({ ...data, idempotencyKey: idempotencyKey(transition) }),
            Time: new Date(transition.recordedAt),
          },
        ],
      }),
    );
    if (result.FailedEntryCount) throw new SinkError(`PutEvents failed: ${result.Entries?.[0]?.ErrorCode ?? 'unknown'}`);
  }
}
