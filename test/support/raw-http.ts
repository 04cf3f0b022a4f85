/**
 * One request with node:http or node:https, for what fetch will not send: any
 * Host header (a DNS-rebinding page, a proxy), a TLS server name and authority
 * of the test's own. The whole answer, as text.
 */
import type { RequestOptions } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export interface RawAnswer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

export function rawRequest(
  options: RequestOptions & { tls?: boolean; ca?: string; servername?: string },
  body?: string,
): Promise<RawAnswer> {
  const { tls, ...rest } = options;
  return new Promise((resolve, reject) => {
    const req = (tls ? httpsRequest : httpRequest)(rest, (res) => {
      let text = '';
      res.on('data', (chunk) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode as number, body: text, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
