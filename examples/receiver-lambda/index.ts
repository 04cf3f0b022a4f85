/**
 * A receiver of Ratchet's effects as a Lambda behind a function URL: set the
 * URL as Ratchet's outbound webhook (`npm run connect -- --effects-url <url>`)
 * and EFFECTS_SIGNING_SECRET to the secret connect stored. A function URL
 * hands over the raw body (base64 when binary): verify those bytes.
 */

import { EffectVerificationError, verifyEffect } from '@ratchet/client/receiver';
import type { LambdaFunctionURLEvent, LambdaFunctionURLResult } from 'aws-lambda';

export const handler = async (event: LambdaFunctionURLEvent): Promise<LambdaFunctionURLResult> => {
  const body = Buffer.from(event.body ?? '', event.isBase64Encoded ? 'base64' : 'utf8');
  try {
    const change = verifyEffect(event.headers, body, process.env.EFFECTS_SIGNING_SECRET ?? '');
    // Your work here, once per change.id (Ratchet retries with the same id until it gets a 2xx).
    console.log(JSON.stringify({ id: change.id, name: change.data.name, state: change.data.state }));
    return { statusCode: 204 };
  } catch (error) {
    if (error instanceof EffectVerificationError) return { statusCode: 400, body: error.code };
    throw error;
  }
};
