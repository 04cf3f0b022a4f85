/**
 * Why a request got no answer, in words: what the command-line tools, the
 * client and the outbound webhook say when the network fails, instead of
 * fetch's bare "fetch failed". Pure: it reads the error fetch (undici) threw.
 */

const WORDS: Readonly<Record<string, string>> = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed for now',
  ETIMEDOUT: 'connection timed out',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  EPIPE: 'connection closed while sending',
  UND_ERR_SOCKET: 'connection closed by the other side',
  UND_ERR_CONNECT_TIMEOUT: 'no connection within the time limit',
  UND_ERR_HEADERS_TIMEOUT: 'no answer within the time limit',
  UND_ERR_BODY_TIMEOUT: 'the answer stopped within the time limit',
  CERT_HAS_EXPIRED: 'TLS: the certificate has expired',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'TLS: a self-signed certificate',
  SELF_SIGNED_CERT_IN_CHAIN: 'TLS: a self-signed certificate in the chain',
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: 'TLS: the certificate cannot be verified',
  ERR_TLS_CERT_ALTNAME_INVALID: 'TLS: the certificate is for another host',
};

/** The system or undici error code behind `error` (fetch wraps it as `cause`), if any. */
export function networkCodeOf(error: unknown): string | undefined {
  for (let at = error, depth = 0; at && typeof at === 'object' && depth < 5; at = (at as { cause?: unknown }).cause, depth++) {
    const code = (at as { code?: unknown }).code;
    if (typeof code === 'string' && code !== 'ABORT_ERR') return code;
    const errors = (at as { errors?: unknown }).errors;
    // Happy eyeballs: every address refused is an AggregateError of the attempts.
    if (Array.isArray(errors) && errors.length > 0) return networkCodeOf(errors[0]);
  }
  return undefined;
}

/** `connection refused (ECONNREFUSED)`, `no answer within 5 s`, or the error's own message. */
export function networkFailureInWords(error: unknown, timeoutMs?: number): string {
  const name = (error as { name?: string } | undefined)?.name;
  if (name === 'TimeoutError' || name === 'HeadersTimeoutError' || name === 'BodyTimeoutError')
    return timeoutMs === undefined ? 'no answer within the time limit' : `no answer within ${secondsOf(timeoutMs)}`;
  const code = networkCodeOf(error);
  if (code) return WORDS[code] ? `${WORDS[code]} (${code})` : code;
  // fetch's own "fetch failed" says nothing: the innermost cause does ("bad port", "invalid URL").
  let innermost = error;
  for (let depth = 0; innermost instanceof Error && innermost.cause instanceof Error && depth < 5; depth++) innermost = innermost.cause;
  return innermost instanceof Error ? innermost.message : String(innermost);
}

function secondsOf(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${ms} ms`;
}

/**
 * Whether `error` says a store is away for now, not that something is wrong
 * in Ratchet: a connection refused, reset, cut or timed out, a statement
 * unanswered in time; a database
 * restarting, failing over, shutting down or full of clients, or ending a
 * statement at its timeout (SQLSTATE class 08, 57P01–57P03, 57014, 53300). Such an error is answered 503 with Retry-After.
 */
/** pg's words for a statement or a connection that got no answer in time (query_timeout, connectionTimeoutMillis). */
export const PG_UNANSWERED =
  /^(Query read timeout|timeout expired|timeout exceeded when trying to connect|Connection terminated due to connection timeout)$/;

export function storeAway(error: unknown): boolean {
  const code = networkCodeOf(error);
  // 57014: a statement the server ended at its statement_timeout (Ratchet sets one in its transactions): busy, not broken.
  if (code && (code in WORDS || /^(08...|57P0[123]|57014|53300)$/.test(code))) return true;
  const message = String((error as Error)?.message ?? '');
  // pg's own timeouts (query_timeout, connectionTimeoutMillis): a server or a network gone silent; or a connection cut.
  return (
    PG_UNANSWERED.test(message) || /Connection terminated|timeout exceeded when trying to connect|terminating connection/i.test(message)
  );
}
