/**
 * Who may use the one-machine runtime, in front of the shared HTTP app:
 *
 * - `POST /webhooks/gemini` (and `/webhooks/openai`, `/webhooks/azure-openai`) is open (its signature is its credential), and
 *   `GET /healthz` needs no token.
 * - Every other route answers only to a Host this Ratchet serves (127.0.0.1,
 *   localhost, [::1], PUBLIC_URL's hosts: 421 otherwise, which stops DNS
 *   rebinding), only to an Origin among those (403), and only with a
 *   credential (401 `{"error":"unauthorized"}`): `Authorization: Bearer
 *   <token>`, or the console's session cookie, which a state-changing request
 *   must pair with its CSRF token (`x-csrf-token`).
 * - The console signs in from a one-time link (`loginLink`, printed at start,
 *   or asked for with the token: `POST /login/link`, what `ratchet login`
 *   calls) or with the token pasted into `/login`: a session cookie follows
 *   (HttpOnly, SameSite=Strict, Secure behind HTTPS, 12 h), and the browser
 *   lands on the page it asked for. Sessions and codes live in a SignInStore
 *   under digests of their secrets: this process's memory on one machine, the
 *   database on PostgreSQL (every instance honours a session any began).
 * - Tracking (`POST /operations`) is rate-limited per credential (429 with
 *   Retry-After).
 *
 * Every answer carries the security headers (Hono's secure-headers: a CSP
 * whose only script and style are the console's own, by nonce; no framing;
 * nosniff; no referrer) and `Cache-Control: no-store`.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { bearerAuth } from 'hono/bearer-auth';
import { getCookie, setCookie } from 'hono/cookie';
import { NONCE, secureHeaders } from 'hono/secure-headers';
import { LOGIN_LINK } from '../../app/http/openapi.ts';
import { serve } from '../../app/http/routes/common.ts';
import { TokenBucket } from '../../app/http/token-bucket.ts';
import type { SignInStore } from '../../app/ports.ts';
import { failureResponse as fail } from '../../core/failures.ts';
import { escapeHtml, page } from '../console/view.ts';
import { MemorySignIns } from './sign-ins.ts';

const SESSION_COOKIE = 'ratchet_session';
const SESSION_MS = 12 * 3_600_000;
const LOGIN_CODE_MS = 15 * 60_000;
/** Open routes: the signature is the webhook's credential; a health check needs none. */
const OPEN = [
  { method: 'POST', path: '/webhooks/gemini' },
  { method: 'POST', path: '/webhooks/openai' },
  { method: 'POST', path: '/webhooks/azure-openai' },
  { method: 'GET', path: '/healthz' },
];
const LOOPBACK_HOSTS = ['127.0.0.1', 'localhost', '[::1]'];

/**
 * The security headers of a JSON answer the runtime writes outside the app
 * (the webhook's, local/http-server.ts): what secure-headers sets, less the
 * console's nonce, which a JSON answer has no use for.
 */
export const API_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-resource-policy': 'same-origin',
  'cache-control': 'no-store',
};

export interface AccessOptions {
  tokens: readonly string[];
  /** PUBLIC_URL: where this Ratchet is reached from outside (a proxy in front), one or more. */
  publicUrls: readonly URL[];
  /** Tracks a credential may make per minute (its burst too). */
  trackRatePerMinute: number;
  logger: Logger;
  clock?: () => number;
  /** Where the app is mounted (`/api/ratchet` inside an application; '' for ratchet start): every link and redirect under it. */
  basePath?: string;
  /** Where sessions and sign-in codes are kept (default: this process's memory). */
  signIns?: SignInStore;
}

interface Session {
  csrf: string;
  /** Which token signed it in (rate limits are per credential). */
  principal: string;
}

export class AccessGuard {
  private readonly signIns: SignInStore;
  private readonly digests: Buffer[];
  private readonly tracking: TokenBucket;
  private readonly clock: () => number;
  private readonly allowedHosts: Set<string>;
  private allowedOrigins = new Set<string>();

  constructor(private readonly options: AccessOptions) {
    this.clock = options.clock ?? Date.now;
    this.signIns = options.signIns ?? new MemorySignIns(this.clock);
    this.digests = options.tokens.map(digest);
    this.tracking = new TokenBucket(options.trackRatePerMinute, 60_000, this.clock);
    this.allowedHosts = new Set([...LOOPBACK_HOSTS, ...options.publicUrls.map((url) => url.hostname)]);
    // Inside an application (the library) there is no port of Ratchet's own: PUBLIC_URL's origins are the pages.
    this.allowedOrigins = new Set(options.publicUrls.map((url) => url.origin));
  }

  /** Once listening: the loopback origins on this port, beside PUBLIC_URL's. */
  listeningOn(port: number): void {
    this.allowedOrigins = new Set([
      ...LOOPBACK_HOSTS.map((host) => `http://${host}:${port}`),
      ...this.options.publicUrls.map((url) => url.origin),
    ]);
  }

  /** Whether a browser page at `origin` may call this Ratchet: a loopback origin on its port, or PUBLIC_URL's. */
  originAllowed(origin: string): boolean {
    return this.allowedOrigins.has(origin);
  }

  /** A link that signs the console in once, within 15 minutes, then opens `next` (a path of the console, default `/`). */
  async loginLink(baseUrl: string, next = '/'): Promise<string> {
    const code = randomBytes(24).toString('base64url');
    await this.signIns.put(keyOf('code', code), localPath(next), this.clock() + LOGIN_CODE_MS);
    return `${baseUrl}${this.base}/login?code=${code}`;
  }

  /** The mount's path ('' at the root). */
  private get base(): string {
    return this.options.basePath ?? '';
  }

  /** The security headers, the checks and the sign-in routes, on `app` before any other route. */
  install(app: Hono): void {
    app.use(
      '*',
      secureHeaders({
        contentSecurityPolicy: {
          defaultSrc: ["'none'"],
          scriptSrc: [NONCE],
          styleSrc: [NONCE],
          connectSrc: ["'self'"],
          formAction: ["'self'"],
          frameAncestors: ["'none'"],
          baseUri: ["'none'"],
        },
        xFrameOptions: 'DENY',
        referrerPolicy: 'no-referrer',
        // The proxy that terminates TLS sets HSTS for its own name: Ratchet speaks plain HTTP behind it.
        strictTransportSecurity: false,
      }),
    );
    app.use('*', async (c, next) => {
      await next();
      c.header('cache-control', 'no-store');
    });
    app.use('*', this.check());
    app.get('/login', (c) => this.orUnavailable(() => this.loginWithCode(c)));
    app.post('/login', (c) => this.orUnavailable(() => this.loginWithToken(c)));
    // A fresh one-time link, for the bearer of a token (`ratchet login`): the printed one lasts 15 minutes.
    serve(app, LOGIN_LINK, async (c) => {
      if (!this.bearerMatches(c)) return this.unauthorized(c, 'a sign-in link is given for the API token only');
      const next = c.req.query('next');
      return this.orUnavailable(async () =>
        c.json({ link: await this.loginLink(new URL(c.req.url).origin, next ?? '/'), expiresInSeconds: LOGIN_CODE_MS / 1000 }),
      );
    });
    app.post('/logout', async (c) => {
      const id = getCookie(c, SESSION_COOKIE);
      if (id) {
        const failed = await this.orUnavailable(async () => {
          await this.signIns.delete(keyOf('session', id));
          return undefined;
        });
        if (failed) return failed;
      }
      setCookie(c, SESSION_COOKIE, '', { path: '/', httpOnly: true, sameSite: 'Strict', maxAge: 0 });
      return c.redirect(`${this.base}/login`, 303);
    });
  }

  private check(): MiddlewareHandler {
    const bearer = bearerAuth({
      verifyToken: (token) => this.matches(token),
      noAuthenticationHeader: { message: (c) => this.unauthorized(c, 'Authorization: Bearer <token> is required') },
      invalidAuthenticationHeader: { message: (c) => this.unauthorized(c, 'Authorization must be Bearer <token>') },
      invalidToken: { message: (c) => this.unauthorized(c, 'the token is not one this Ratchet accepts') },
    });
    return async (c, next) => {
      if (OPEN.some((route) => route.method === c.req.method && route.path === c.req.path)) return next();
      const host = c.req.header('host') ?? '';
      if (!this.allowedHosts.has(hostnameOf(host))) {
        this.options.logger.warn('request for a host this Ratchet does not serve refused', { host: host.slice(0, 200), path: c.req.path });
        return fail(
          'misdirected-request',
          `${host.slice(0, 100) || 'no Host'} is not a host this Ratchet serves (PUBLIC_URL names the public ones)`,
        );
      }
      if (!this.fromAllowedPage(c)) {
        this.options.logger.warn('request from a foreign origin refused', {
          origin: c.req.header('origin')?.slice(0, 200),
          site: c.req.header('sec-fetch-site'),
          path: c.req.path,
        });
        return fail('foreign-origin', 'requests from another origin are refused');
      }
      if (c.req.path === '/login' || c.req.path === '/logout' || c.req.path === '/login/link') return next();
      if (c.req.header('authorization') !== undefined) {
        return bearer(c, async () => {
          if (this.overTrackingRate(c, principalOf(c.req.header('authorization') as string))) return;
          await next();
        });
      }
      let session: Session | undefined;
      try {
        session = await this.sessionOf(c);
      } catch (error) {
        return this.unavailable(error);
      }
      if (!session) return this.unauthorized(c, 'Authorization: Bearer <token> is required');
      if (c.req.method !== 'GET' && c.req.method !== 'HEAD' && !sameSecret(c.req.header('x-csrf-token') ?? '', session.csrf)) {
        return fail('unauthorized', 'a signed-in console request that changes something must carry its x-csrf-token');
      }
      if (this.overTrackingRate(c, session.principal)) return c.res;
      c.set('csrfToken' as never, session.csrf as never);
      await next();
    };
  }

  /**
   * Whether a request a browser may have sent comes from this Ratchet's own
   * pages. An Origin must be one of the allowed origins; `Origin: null` is what
   * a browser sends for its own form posts and fetches under `Referrer-Policy:
   * no-referrer`, so it passes only where the browser's Fetch Metadata says
   * same-origin. Any other site's request (`Sec-Fetch-Site: same-site` covers
   * localhost's other ports) is refused, but a link followed from elsewhere
   * (it carries no session cookie: SameSite=Strict).
   */
  private fromAllowedPage(c: Context): boolean {
    const origin = c.req.header('origin');
    const site = c.req.header('sec-fetch-site');
    if (origin === 'null') {
      if (site !== 'same-origin') return false;
    } else if (origin !== undefined && !this.originAllowed(origin)) return false;
    const followedLink = c.req.method === 'GET' && c.req.header('sec-fetch-mode') === 'navigate';
    return !((site === 'cross-site' || site === 'same-site') && !followedLink);
  }

  /** True (the 429 already set on `c`) when this credential tracked too much this minute. */
  private overTrackingRate(c: Context, principal: string): boolean {
    if (c.req.method !== 'POST' || c.req.path !== '/operations') return false;
    const waitMs = this.tracking.take(principal);
    if (waitMs === 0) return false;
    c.res = fail('rate-limited', `too many tracks with this credential: at most ${this.options.trackRatePerMinute} a minute`);
    c.res.headers.set('retry-after', String(Math.ceil(waitMs / 1000)));
    return true;
  }

  /** Compares with every token, each in constant time, so neither timing nor the count tells which was close. */
  private matches(token: string): boolean {
    const given = digest(token);
    let found = false;
    for (const expected of this.digests) found = timingSafeEqual(given, expected) || found;
    return found;
  }

  /** `answer`, or 503 with Retry-After when the sign-ins cannot be read or written (the database away). */
  private async orUnavailable<T>(answer: () => Promise<T>): Promise<T | Response> {
    try {
      return await answer();
    } catch (error) {
      return this.unavailable(error);
    }
  }

  private unavailable(error: unknown): Response {
    this.options.logger.warn('the console sign-ins could not be read or written', { error });
    return fail('not-recorded', 'sign-ins cannot be read now (the database is away); retry shortly');
  }

  private async sessionOf(c: Context): Promise<Session | undefined> {
    const id = getCookie(c, SESSION_COOKIE);
    const value = id ? await this.signIns.get(keyOf('session', id), this.clock()) : undefined;
    return value === undefined ? undefined : (JSON.parse(value) as Session);
  }

  private async startSession(c: Context, principal: string, next = '/'): Promise<Response> {
    const id = randomBytes(32).toString('base64url');
    const session: Session = { csrf: randomBytes(24).toString('base64url'), principal };
    await this.signIns.put(keyOf('session', id), JSON.stringify(session), this.clock() + SESSION_MS);
    setCookie(c, SESSION_COOKIE, id, {
      path: '/',
      httpOnly: true,
      sameSite: 'Strict',
      secure: this.overHttps(c),
      maxAge: SESSION_MS / 1000,
    });
    return c.redirect(`${this.base}${next}`, 303);
  }

  private async loginWithCode(c: Context): Promise<Response> {
    const code = c.req.query('code');
    if (code === undefined) return this.loginPage(c, 200, undefined, c.req.query('next'));
    const next = await this.signIns.take(keyOf('code', code), this.clock());
    if (next === undefined)
      return this.loginPage(
        c,
        401,
        'This sign-in link was used already, or has expired: each works once, within 15 minutes. For a new one run ratchet login ' +
          '(npm run login in the checkout Ratchet runs from) where its API token is, or paste the token below.',
      );
    return this.startSession(c, 'login-link', next);
  }

  private async loginWithToken(c: Context): Promise<Response> {
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const token = typeof form.token === 'string' ? form.token.trim() : '';
    const next = typeof form.next === 'string' ? form.next : undefined;
    if (!token || !this.matches(token)) return this.loginPage(c, 401, 'That is not a token this Ratchet accepts.', next);
    return this.startSession(c, principalOf(`Bearer ${token}`), localPath(next ?? '/'));
  }

  private bearerMatches(c: Context): boolean {
    const header = c.req.header('authorization') ?? '';
    return header.startsWith('Bearer ') && this.matches(header.slice('Bearer '.length).trim());
  }

  private unauthorized(c: Context, message: string): Response {
    const wantsPage =
      c.req.method === 'GET' &&
      (c.req.path === '/' || c.req.path.startsWith('/console/')) &&
      /text\/html/.test(c.req.header('accept') ?? '');
    // The page asked for is where signing in lands.
    const url = new URL(c.req.url);
    const response = wantsPage ? this.loginPage(c, 401, undefined, `${url.pathname}${url.search}`) : fail('unauthorized', message);
    response.headers.set('www-authenticate', 'Bearer realm="ratchet"');
    return response;
  }

  private loginPage(c: Context, status: 200 | 401, problem?: string, next?: string): Response {
    const nonce = c.get('secureHeadersNonce' as never) as string | undefined;
    const body = `${problem ? `<p class="FAILED">${escapeHtml(problem)}</p>` : ''}
<p>Open a sign-in link (Ratchet prints one when it starts; <code>ratchet login</code> prints a new one), or paste its API token
(RATCHET_API_TOKEN, or the file <code>api-token</code> in its data folder).</p>
<form method="post" action="${escapeHtml(this.base)}/login"><p><label>API token <input type="password" name="token" autocomplete="current-password" required size="48"></label>
${next ? `<input type="hidden" name="next" value="${escapeHtml(localPath(next))}">` : ''}<button type="submit">Sign in</button></p></form>`;
    return c.html(page('sign in', body, { nonce, basePath: this.base }), status);
  }

  private overHttps(c: Context): boolean {
    return c.req.header('x-forwarded-proto') === 'https' || new URL(c.req.url).protocol === 'https:';
  }
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** A credential's name for its rate limit: a digest of the token, never the token. */
function principalOf(authorization: string): string {
  return digest(authorization.replace(/^Bearer\s+/i, ''))
    .toString('base64url')
    .slice(0, 16);
}

/** Only a path of this site: never another origin (`//evil.example`, `https://…`). */
function localPath(path: string): string {
  return path.startsWith('/') && !path.startsWith('//') && !path.includes('\\') ? path : '/';
}

/** `example.com:3000` → `example.com`; `[::1]:3000` → `[::1]`. */
function hostnameOf(host: string): string {
  const match = host.toLowerCase().match(/^(\[[^\]]*\]|[^:]*)(?::\d+)?$/);
  return match?.[1] ?? '';
}

/** A sign-in's key in its store: its kind and a digest of its secret (whoever reads the store cannot sign in with it). */
function keyOf(kind: 'session' | 'code', secret: string): string {
  return `${kind}:${createHash('sha256').update(secret).digest('base64url')}`;
}
