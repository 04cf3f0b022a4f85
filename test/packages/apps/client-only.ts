// Type-checked on its own, without the DOM library: the client's and the receiver's types need only Node's.
import { type OperationView, RatchetClient, RatchetError, type RatchetErrorCode, sigV4Signer } from '@ratchet/client';
import { type StateChangedEvent, verifyEffect } from '@ratchet/client/receiver';

export async function check(url: string, secret: string, headers: Headers, body: string): Promise<string> {
  const client = new RatchetClient({ url, signer: url.includes('execute-api') ? sigV4Signer({ region: 'eu-west-1' }) : 'none' });
  const tracked: { created: boolean } = await client.track('batches/1', { metadata: { order: 'A-17' } });
  const view: OperationView | undefined = await client.get('batches/1');
  const done = await client.waitFor('batches/1', { until: 'SUCCEEDED', timeoutMs: 1_000 }).catch((error: unknown) => {
    const code: RatchetErrorCode | undefined = error instanceof RatchetError ? error.code : undefined;
    return code;
  });
  const event: StateChangedEvent = verifyEffect(headers, body, secret);
  return `${tracked.created} ${view?.version} ${typeof done} ${event.data.state}`;
}
