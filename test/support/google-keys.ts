/**
 * Test-side stand-in for Google's dynamic-webhook signing: locally generated
 * Ed25519 and RSA keys, published as a JSON Web Key Set by a key server on
 * 127.0.0.1, and deliveries signed with them (`v1a,<base64>` Ed25519 over
 * `id.timestamp.body`, or an RS256 JWT in `webhook-signature`), computed with
 * node:crypto and jose's signing side rather than with the code under test.
 */
import { sign as cryptoSign, generateKeyPairSync, type KeyObject, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type JWTPayload, SignJWT } from 'jose';
import type { SignedDelivery } from './deliveries.ts';

export interface SigningKey {
  kid: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
  publicJwk: Record<string, unknown>;
}

export function ed25519Key(kid = `ed-${randomUUID().slice(0, 8)}`): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { kid, privateKey, publicKey, publicJwk: { ...publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'EdDSA' } };
}

export function rsaKey(kid = `rsa-${randomUUID().slice(0, 8)}`): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { kid, privateKey, publicKey, publicJwk: { ...publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' } };
}

function headersFor(id: string, timestamp: number, signature: string): Record<string, string> {
  return { 'content-type': 'application/json', 'webhook-id': id, 'webhook-timestamp': String(timestamp), 'webhook-signature': signature };
}

/** A `v1a` delivery: Standard Webhooks' asymmetric signature. */
export function ed25519Delivery(key: SigningKey, payload: unknown, options: { id?: string; timestamp?: number } = {}): SignedDelivery {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const id = options.id ?? `msg_${randomUUID()}`;
  const timestamp = options.timestamp ?? Math.floor(Date.now() / 1000);
  const signature = cryptoSign(null, Buffer.from(`${id}.${timestamp}.${body}`), key.privateKey).toString('base64');
  return { body, headers: headersFor(id, timestamp, `v1a,${signature}`) };
}

export const GOOGLE_ISSUER = 'https://generativelanguage.googleapis.com';

/** A delivery whose `webhook-signature` is a JWT (RS256 unless the test builds another). */
export async function jwtDelivery(
  key: SigningKey,
  payload: unknown,
  claims: {
    audience: string;
    issuer?: string;
    expiresInSeconds?: number;
    alg?: string;
    secret?: Uint8Array;
    /** `iat` this long before now (default 0); `withoutIat` leaves it out. */
    issuedAgoSeconds?: number;
    withoutIat?: boolean;
    /** The `webhook_id` claim, when it is to differ from the delivery's webhook-id. */
    webhookId?: string;
  },
): Promise<SignedDelivery> {
  const body = JSON.stringify(payload);
  const id = `msg_${randomUUID()}`;
  const timestamp = Math.floor(Date.now() / 1000);
  const jwt = new SignJWT({ webhook_id: claims.webhookId ?? id } satisfies JWTPayload)
    .setProtectedHeader({ alg: claims.alg ?? 'RS256', kid: key.kid, typ: 'JWT' })
    .setIssuer(claims.issuer ?? GOOGLE_ISSUER)
    .setAudience(claims.audience)
    .setExpirationTime(timestamp + (claims.expiresInSeconds ?? 300));
  if (!claims.withoutIat) jwt.setIssuedAt(timestamp - (claims.issuedAgoSeconds ?? 0));
  const token = await jwt.sign(claims.secret ?? key.privateKey);
  return { body, headers: headersFor(id, timestamp, token) };
}

/** The same claims with `alg: none` and no signature, as an attacker would send. */
export function unsignedJwtDelivery(payload: unknown, audience: string): SignedDelivery {
  const body = JSON.stringify(payload);
  const id = `msg_${randomUUID()}`;
  const timestamp = Math.floor(Date.now() / 1000);
  const part = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const token = `${part({ alg: 'none', typ: 'JWT' })}.${part({ iss: GOOGLE_ISSUER, aud: audience, exp: timestamp + 300 })}.`;
  return { body, headers: headersFor(id, timestamp, token) };
}

/** HS256 "signed" with the public key's text as the secret: the classic algorithm-confusion forgery. */
export function publicKeyAsSecret(key: SigningKey): Uint8Array {
  return new TextEncoder().encode(String(key.publicKey.export({ format: 'pem', type: 'spki' })));
}

/** Publishes keys at `GET /jwks.json`; `down` answers 503, `fetches` counts requests. */
export class KeyServer {
  keys: SigningKey[];
  down = false;
  fetches = 0;
  private server?: Server;

  constructor(...keys: SigningKey[]) {
    this.keys = keys;
  }

  get url(): string {
    if (!this.server) throw new Error('key server not started');
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/jwks.json`;
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      this.fetches++;
      if (this.down || req.url !== '/jwks.json') {
        res.writeHead(this.down ? 503 : 404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: this.keys.map((key) => key.publicJwk) }));
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    return this;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }
}
