/**
 * API Gateway's IAM authorization, as the stand-in API enforces it: a route
 * the template marks `AWS_IAM` needs a SigV4 signature (service
 * `execute-api`) by a known caller over exactly this request, made within
 * the last 5 minutes. The signature is recomputed with the SDK's signer from
 * the headers the request says it signed, and compared.
 */
import { createHash } from 'node:crypto';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';

export type Verdict = 'ok' | 'missing' | 'unknown-caller' | 'expired' | 'mismatch';

const AUTHORIZATION =
  /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/execute-api\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/;

export async function verifySigV4(
  request: { method: string; url: URL; headers: Record<string, string>; body: string },
  callers: Record<string, string>,
  now = Date.now(),
): Promise<Verdict> {
  const match = request.headers.authorization?.match(AUTHORIZATION);
  const amzDate = request.headers['x-amz-date'];
  if (!match || !amzDate) return 'missing';
  const [, accessKeyId, , region, signedHeaders] = match as unknown as [string, string, string, string, string];
  const secretAccessKey = callers[accessKeyId];
  if (!secretAccessKey) return 'unknown-caller';
  const signingDate = new Date(amzDate.replace(/^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/, '$1-$2-$3T$4:$5:$6Z'));
  if (!(Math.abs(now - signingDate.getTime()) <= 5 * 60_000)) return 'expired';
  // The signature covers the body through its hash: a signed hash header must be the hash of the body that came.
  const bodyHash = createHash('sha256').update(request.body).digest('hex');
  const claimed = request.headers['x-amz-content-sha256'];
  if (claimed !== undefined && claimed !== bodyHash) return 'mismatch';
  const headers = Object.fromEntries(signedHeaders.split(';').map((name) => [name, request.headers[name] ?? '']));
  const signer = new SignatureV4({ service: 'execute-api', region, sha256: Sha256, credentials: { accessKeyId, secretAccessKey } });
  const expected = await signer.sign(
    {
      method: request.method,
      protocol: 'http:',
      hostname: request.url.hostname,
      path: request.url.pathname,
      query: Object.fromEntries(request.url.searchParams),
      headers,
      ...(request.body && { body: request.body }),
    },
    { signingDate },
  );
  return expected.headers.authorization === request.headers.authorization ? 'ok' : 'mismatch';
}
