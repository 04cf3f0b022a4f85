/** The one DynamoDB client factory. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

export interface DynamoDbSettings {
  /** Use this DynamoDB endpoint (moto in the tests) instead of the regional one. */
  endpoint?: string;
  region?: string;
  /** Per-request timeout; the webhook must answer Gemini within a few seconds. */
  requestTimeoutMs?: number;
  /** Tries per request (the SDK's retries included). */
  maxAttempts?: number;
}

export function createDynamoDbClient(settings: DynamoDbSettings = {}): DynamoDBClient {
  const local = settings.endpoint !== undefined;
  return new DynamoDBClient({
    ...(local && {
      endpoint: settings.endpoint,
      // A local endpoint accepts any credentials; fixed dummies keep one shared account.
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    }),
    region: settings.region ?? process.env.AWS_REGION ?? 'us-east-1',
    maxAttempts: settings.maxAttempts ?? 3,
    requestHandler: { requestTimeout: settings.requestTimeoutMs ?? 2_000, connectionTimeout: 1_000 },
  });
}

export function createDocumentClient(client: DynamoDBClient): DynamoDBDocumentClient {
  return DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
}

/**
 * DynamoDB errors that mean "never": the request itself is invalid, so the
 * same request fails again. Everything else (throttling, 5xx, network,
 * timeouts; also a missing table or permission, which an operator can fix) is
 * worth retrying. Both server-side and client-side (marshalling) refusals count.
 */
const NEVER = new Set(['ValidationException', 'SerializationException', 'ItemCollectionSizeLimitExceededException']);

export function isPermanentRejection(error: unknown): boolean {
  return error instanceof Error && NEVER.has(error.name);
}
