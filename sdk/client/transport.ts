/**
 * The client's transport: one JSON request to the API, signed (SigV4) or
 * carrying the API token, retried with backoff on a failed connection and on
 * the answers that pass (429, 502, 503, 504); every other answer is a
 * RatchetError with the API's error code.
 */
import { networkFailureInWords } from '../../core/network.ts';
import { RatchetError, type RatchetErrorCode } from './errors.ts';
import { EXECUTE_API_HOST, type RequestSigner, sigV4Signer } from './sigv4.ts';

export interface TransportOptions {
  url: unknown;
  signer?: RequestSigner | 'none';
  token?: string;
  retries?: number;
  fetch?: typeof fetch;
}

export class Transport {
  private readonly base: string;
  /** Set when requests are signed (a deployed stack): no long polls there. */
  readonly signer?: RequestSigner;
  private readonly token?: string;
  private readonly retries: number;
  private readonly fetch: typeof fetch;

  constructor(options: TransportOptions) {
    const url = httpUrl(options.url);
    this.base = url.href.replace(/\/+$/, '');
    this.retries = options.retries ?? 4;
    this.fetch = options.fetch ?? globalThis.fetch;
    if (options.signer === 'none') this.signer = undefined;
    else if (options.signer) this.signer = options.signer;
    else if (EXECUTE_API_HOST.test(url.hostname)) this.signer = sigV4Signer();
    const token = options.token ?? globalThis.process?.env?.RATCHET_API_TOKEN?.split(/[\s,]+/).find(Boolean);
    if (!this.signer && token) this.token = token;
  }

  async request(
    method: 'GET' | 'POST',
    path: string,
    json?: unknown,
    signal?: AbortSignal,
  ): Promise<{ status: number; body: unknown; headers: Headers }> {
    const url = new URL(`${this.base}${path}`);
    const body = json === undefined ? undefined : JSON.stringify(json);
    for (let attempt = 0; ; attempt++) {
      let headers: Record<string, string> = {
        accept: 'application/json',
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...(this.token && { authorization: `Bearer ${this.token}` }),
      };
      if (this.signer) headers = { ...headers, ...(await this.signer({ method, url, headers, ...(body !== undefined && { body }) })) };
      let response: Response;
      try {
        response = await this.fetch(url, { method, headers, ...(body !== undefined && { body }), ...(signal && { signal }) });
      } catch (error) {
        signal?.throwIfAborted();
        if (attempt < this.retries) {
          await sleep(backoff(attempt), signal);
          continue;
        }
        throw new RatchetError(
          'network',
          `${method} ${url.origin}${url.pathname}: ${networkFailureInWords(error)}, after ${attempt + 1} attempts`,
          undefined,
          undefined,
          { cause: error },
        );
      }
      if (RETRIED.has(response.status) && attempt < this.retries) {
        await response.body?.cancel();
        await sleep(backoff(attempt), signal);
        continue;
      }
      const text = await response.text();
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch {
        throw new RatchetError(
          'unexpected-response',
          `${method} ${url.pathname}: HTTP ${response.status}, not JSON: ${text.slice(0, 200)}`,
          response.status,
        );
      }
      if (response.ok) return { status: response.status, body: parsed, headers: response.headers };
      const { error, message } = (parsed ?? {}) as { error?: string; message?: string };
      // API Gateway's own refusals (a missing or bad signature: 403 {"message": …}) carry no code of ours.
      const code = (error ?? (response.status === 403 ? 'invalid-signature' : 'unexpected-response')) as RatchetErrorCode;
      throw new RatchetError(code, `${method} ${url.pathname}: HTTP ${response.status}: ${message ?? text.slice(0, 200)}`, response.status);
    }
  }
}

/**
 * Answers that pass: 503 (Ratchet's store briefly unavailable), and API
 * Gateway's 429 (its throttle), 502 and 504 (the function failed or timed
 * out). Every call is safe to repeat: reads, and tracking (a known job is 200).
 */
const RETRIED = new Set([429, 502, 503, 504]);

/** The API's base URL, or a RatchetError naming what was given instead. */
function httpUrl(given: unknown): URL {
  let url: URL | undefined;
  try {
    url = new URL(String(given));
  } catch {
    // not a URL at all: said below
  }
  if (typeof given !== 'string' || !url || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new RatchetError(
      'invalid-url',
      `RatchetClient: url must be an http:// or https:// URL, got ${JSON.stringify(given) ?? String(given)}`,
    );
  return url;
}

/** `path`, with the parameters that are set as its query. */
export function withQuery(path: string, parameters: Record<string, string | number | boolean | undefined>): string {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(parameters)) if (value !== undefined) query.set(key, String(value));
  return query.size > 0 ? `${path}?${query}` : path;
}

/** Names keep their slashes (`batches/123`); each segment is escaped. */
export function encodeName(name: string): string {
  return name.split('/').map(encodeURIComponent).join('/');
}

export function backoff(attempt: number): number {
  return 200 * 2 ** attempt * (0.75 + Math.random() / 2);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', abort);
      resolve();
    }, ms);
    const abort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', abort, { once: true });
  });
}
