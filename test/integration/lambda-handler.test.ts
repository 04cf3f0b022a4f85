/**
 * The deployed entry point itself (lambda/handlers/api.ts), fed API Gateway
 * HTTP API (payload v2) events, against moto.
 */
import type { APIGatewayProxyEventV2, APIGatewayProxyResultV2, Context } from 'aws-lambda';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { httpApiEvent } from '../support/api-gateway.ts';
import { envelope, newSecret, signedDelivery } from '../support/deliveries.ts';

const secret = newSecret();
let handler: (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyResultV2>;

beforeAll(async () => {
  // The handler composes itself from the environment at cold start, as in Lambda.
  process.env.TABLE_NAME = inject('tableName');
  process.env.DYNAMODB_ENDPOINT = inject('dynamodbEndpoint');
  process.env.WEBHOOK_SIGNING_SECRETS = `${newSecret()} ${secret}`;
  ({ handler } = (await import('../../lambda/handlers/api.ts')) as never);
});

const context = { awsRequestId: 'req', functionName: 'api', getRemainingTimeInMillis: () => 10_000 } as Context;

async function call(event: APIGatewayProxyEventV2) {
  const result = (await handler(event, context)) as { statusCode: number; body: string };
  return { status: result.statusCode, body: JSON.parse(result.body) };
}

describe('Lambda handler (API Gateway payload v2)', () => {
  it('verifies a base64-encoded body on its exact bytes and stores the event', async () => {
    const name = `batches/lambda-${Date.now()}`;
    const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: name, note: 'héllo ✓' }));
    expect(await call(httpApiEvent('POST', '/webhooks/gemini', body, headers, true))).toMatchObject({
      status: 200,
      body: { applied: true, operation: { name, state: 'SUCCEEDED' } },
    });
    expect(await call(httpApiEvent('GET', `/operations/${name}`))).toMatchObject({
      status: 200,
      body: { name, state: 'SUCCEEDED', version: 1 },
    });
  });

  it('answers 401 when the decoded body differs from what was signed', async () => {
    const { body, headers } = signedDelivery(secret, envelope('batch.succeeded', { id: 'batches/tampered' }));
    expect((await call(httpApiEvent('POST', '/webhooks/gemini', body.replace('tampered', 'tampereD'), headers, true))).status).toBe(401);
  });

  it('tracks an operation through POST /operations', async () => {
    const name = `batches/tracked-${Date.now()}`;
    const created = await call(httpApiEvent('POST', '/operations', JSON.stringify({ name }), { 'content-type': 'application/json' }));
    expect(created).toMatchObject({ status: 201, body: { name, state: null, version: 1 } });
  });
});
