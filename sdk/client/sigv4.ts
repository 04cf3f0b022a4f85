/** Signing requests to a deployed stack: SigV4 for API Gateway, from the client's optional peers. */
import { RatchetError } from './errors.ts';

/** Signs one request; see `sigV4Signer`. */
export type RequestSigner = (request: {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string;
}) => Promise<Record<string, string>>;

/** A deployed API's own host name, `<id>.execute-api.<region>.amazonaws.com`; the region is its group. */
export const EXECUTE_API_HOST = /\.execute-api\.([a-z0-9-]+)\.amazonaws\.com$/;

/**
 * SigV4 for API Gateway (`execute-api`) with the SDK's own signer and, unless
 * given, the default credential chain (environment, SSO, profiles, the
 * Lambda or container role…). The region is read from the API's host name
 * unless given (a custom domain needs it). Loaded on first use only, from
 * the client's optional peer dependencies (SIGV4_PACKAGES): an app that never
 * talks to a deployed stack installs none of the AWS SDK.
 */
export function sigV4Signer(
  options: { region?: string; credentials?: AwsCredentials | (() => Promise<AwsCredentials>) } = {},
): RequestSigner {
  let signer: Promise<Signer> | undefined;
  return async ({ method, url, headers, body }) => {
    const region = options.region ?? url.hostname.match(EXECUTE_API_HOST)?.[1] ?? process.env.AWS_REGION;
    if (!region) throw new RatchetError('invalid-signature', `cannot tell the region of ${url.host}: pass sigV4Signer({ region })`);
    signer ??= (async () => {
      const [{ SignatureV4 }, { Sha256 }, credentials] = await Promise.all([
        optionalPeer(() => import('@smithy/signature-v4'), '@smithy/signature-v4'),
        optionalPeer(() => import('@smithy/core/checksum'), '@smithy/core'),
        options.credentials ??
          optionalPeer(() => import('@aws-sdk/credential-provider-node'), '@aws-sdk/credential-provider-node').then((m) =>
            m.defaultProvider(),
          ),
      ]);
      return new SignatureV4({ service: 'execute-api', region, sha256: Sha256, credentials });
    })().catch((error) => {
      signer = undefined; // a package installed meanwhile is found on the next request
      throw error;
    });
    const signed = await (await signer).sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port && { port: Number(url.port) }),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: { ...headers, host: url.host },
      ...(body !== undefined && { body }),
    });
    const { host: _host, ...rest } = signed.headers;
    return rest;
  };
}

/** AWS credentials, as the SDK's providers give them. */
export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  expiration?: Date;
}

/** What the client needs of the SDK's SignatureV4. */
interface Signer {
  sign(request: {
    method: string;
    protocol: string;
    hostname: string;
    port?: number;
    path: string;
    query: Record<string, string>;
    headers: Record<string, string>;
    body?: string;
  }): Promise<{ headers: Record<string, string> }>;
}

/**
 * The SigV4 packages are optional peer dependencies: only an app that talks
 * to a deployed stack installs them. Missing, they make one clear error.
 */
async function optionalPeer<T>(load: () => Promise<T>, name: string): Promise<T> {
  try {
    return await load();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') throw error;
    throw new RatchetError(
      'missing-dependency',
      `signing requests to a deployed Ratchet (SigV4) needs ${name}: npm install ${SIGV4_PACKAGES.join(' ')}`,
    );
  }
}

/** What an app installs beside the client to sign with SigV4 (the client's optional peer dependencies). */
export const SIGV4_PACKAGES = ['@smithy/signature-v4', '@smithy/core', '@aws-sdk/credential-provider-node'];
