import { createHmac, randomBytes } from 'node:crypto';

/**
 * OAuth 1.0a request signing (RFC 5849, section 3). The proxy signs each upstream request with
 * the connection's consumer and token credentials; the vault signs the temporary-credential and
 * token requests of the three-legged flow. Nothing here is sent anywhere or logged.
 */

export type OAuth1SignatureMethod = 'HMAC-SHA1' | 'HMAC-SHA256' | 'PLAINTEXT';

/** Decoded parameter values; a list stands for a repeated name (`a=1&a=2`). */
export type OAuth1Params = Record<string, string | readonly string[]>;

export interface OAuth1Request {
  method: string;
  /** The full request URL, query included: the query is signed, the base string URI drops it. */
  url: string | URL;
  consumerKey: string;
  consumerSecret: string;
  /** Absent for requests not made on behalf of a resource owner (RFC 5849, 3.1). */
  token?: string | undefined;
  tokenSecret?: string | undefined;
  /** Defaults to HMAC-SHA1. */
  signatureMethod?: OAuth1SignatureMethod | undefined;
  /** Sent in the header only; never signed (RFC 5849, 3.4.1.3.1). */
  realm?: string | undefined;
  /** Defaults to 128 random bits, hex. */
  nonce?: string | undefined;
  /** Seconds since the epoch; defaults to now. */
  timestamp?: number | string | undefined;
  /**
   * Decoded parameters of an `application/x-www-form-urlencoded` body, and only of such a body
   * (RFC 5849, 3.4.1.3.1): other bodies are not signed.
   */
  bodyParams?: OAuth1Params | undefined;
  /**
   * Sends and signs `oauth_version="1.0"` (default true). The RFC makes it optional and servers
   * must accept it, while some older providers insist on it; the RFC's own examples omit it.
   */
  includeVersion?: boolean | undefined;
  /**
   * Further protocol parameters, sent in the header and signed: `oauth_callback` on the
   * temporary-credential request, `oauth_verifier` on the token request (RFC 5849, 2.1 and 2.3).
   */
  protocolParams?: Record<`oauth_${string}`, string> | undefined;
}

/**
 * RFC 3986 percent-encoding as RFC 5849 (3.6) requires: every octet of the UTF-8 form except the
 * unreserved set `A-Z a-z 0-9 - . _ ~` becomes `%XX` with upper-case hex. encodeURIComponent
 * also spares `! ' ( ) *`, so those are encoded here.
 */
export function percentEncode(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`);
}

type Pair = readonly [name: string, value: string];

function pairsOf(params: OAuth1Params): Pair[] {
  return Object.entries(params).flatMap(([name, value]): Pair[] =>
    typeof value === 'string' ? [[name, value]] : value.map((item): Pair => [name, item]),
  );
}

/** RFC 5849, 3.4.1.2: lower-case scheme and host, default port dropped, no query or fragment. */
function baseStringUri(url: URL): string {
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`OAuth 1.0a signs http and https requests only, not ${url.protocol}`);
  }
  // The WHATWG parser already lower-cases scheme and host and empties a default port; the path
  // keeps the percent-encoding it will be sent with, so the signed path is the requested one.
  return `${url.protocol}//${url.host}${url.pathname}`;
}

export interface SignatureBaseStringInput {
  method: string;
  url: string | URL;
  /** Every signed oauth_* protocol parameter (oauth_signature is ignored if present). */
  oauthParams: OAuth1Params;
  bodyParams?: OAuth1Params | undefined;
}

/**
 * RFC 5849, 3.4.1: `METHOD&encoded-base-URI&encoded-normalized-parameters`, the parameters being
 * the query's, the form body's and the oauth_* ones, each name and value encoded, sorted by name
 * then value in byte order, duplicates kept.
 */
export function signatureBaseString(input: SignatureBaseStringInput): string {
  const url = typeof input.url === 'string' ? new URL(input.url) : input.url;
  // URLSearchParams decodes as a form body does (`+` is a space), as RFC 5849 3.4.1.3.1 asks.
  const pairs: Pair[] = [
    ...url.searchParams.entries(),
    ...pairsOf(input.bodyParams ?? {}),
    ...pairsOf(input.oauthParams),
  ];
  const normalized = pairs
    .filter(([name]) => name !== 'oauth_signature')
    .map(([name, value]): Pair => [percentEncode(name), percentEncode(value)])
    // Plain code-unit comparison: the encoded strings are ASCII, so this is byte order, which
    // the RFC requires; localeCompare would not be.
    .sort(([nameA, valueA], [nameB, valueB]) => compare(nameA, nameB) || compare(valueA, valueB))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  return [input.method.toUpperCase(), percentEncode(baseStringUri(url)), percentEncode(normalized)].join('&');
}

function compare(a: string, b: string): number {
  if (a === b) return 0;
  return a < b ? -1 : 1;
}

function sign(method: OAuth1SignatureMethod, key: string, baseString: () => string): string {
  switch (method) {
    case 'HMAC-SHA1':
      return createHmac('sha1', key).update(baseString()).digest('base64');
    case 'HMAC-SHA256':
      return createHmac('sha256', key).update(baseString()).digest('base64');
    case 'PLAINTEXT':
      // RFC 5849, 3.4.4: the key itself, meant only for TLS connections.
      return key;
  }
}

/** The header's realm is a quoted-string; refusing quotes, backslashes and controls keeps it one. */
function assertQuotable(realm: string): void {
  if (/["\\\u0000-\u001f\u007f]/.test(realm)) throw new Error('OAuth 1.0a realm must not contain quotes, backslashes or control characters');
}

/**
 * The value of the `Authorization` header for one request: `OAuth realm="…", oauth_…="…", …`.
 * Sign exactly the method, URL and form parameters that are then sent: any difference, even in
 * the path's percent-encoding, makes the provider reject the signature.
 */
export function oauth1Header(request: OAuth1Request): string {
  const signatureMethod = request.signatureMethod ?? 'HMAC-SHA1';
  const oauthParams: Record<string, string> = {
    // First, so that none of them can replace the ones computed here.
    ...request.protocolParams,
    oauth_consumer_key: request.consumerKey,
    oauth_nonce: request.nonce ?? randomBytes(16).toString('hex'),
    oauth_signature_method: signatureMethod,
    oauth_timestamp: String(request.timestamp ?? Math.floor(Date.now() / 1000)),
  };
  if (request.token !== undefined) oauthParams.oauth_token = request.token;
  if (request.includeVersion ?? true) oauthParams.oauth_version = '1.0';

  const key = `${percentEncode(request.consumerSecret)}&${percentEncode(request.tokenSecret ?? '')}`;
  const signature = sign(signatureMethod, key, () =>
    signatureBaseString({ method: request.method, url: request.url, oauthParams, bodyParams: request.bodyParams }),
  );

  const fields = Object.entries({ ...oauthParams, oauth_signature: signature })
    .sort(([a], [b]) => compare(a, b))
    .map(([name, value]) => `${name}="${percentEncode(value)}"`);
  if (request.realm !== undefined) {
    assertQuotable(request.realm);
    fields.unshift(`realm="${request.realm}"`);
  }
  return `OAuth ${fields.join(', ')}`;
}
