/** API Gateway HTTP API (payload v2) events, as the Lambda integration delivers them. */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';

export function httpApiEvent(
  method: string,
  path: string,
  body?: string,
  headers: Record<string, string> = {},
  base64 = false,
): APIGatewayProxyEventV2 {
  return {
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { host: 'abc.execute-api.eu-west-1.amazonaws.com', ...headers },
    requestContext: {
      accountId: '123456789012',
      apiId: 'abc',
      domainName: 'abc.execute-api.eu-west-1.amazonaws.com',
      domainPrefix: 'abc',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: '192.0.2.1', userAgent: 'test' },
      requestId: 'req',
      routeKey: '$default',
      stage: '$default',
      time: '02/Dec/2026:10:00:00 +0000',
      timeEpoch: Date.now(),
    },
    body: body === undefined ? undefined : base64 ? Buffer.from(body).toString('base64') : body,
    isBase64Encoded: base64,
  };
}
