import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { BodyTooLarge, readBody } from './read-body.js';

/**
 * A real OAuth 1.0a provider (RFC 5849) on loopback, for tests of the three-legged flow: it
 * checks HMAC-SHA1 signatures on its own (nothing shared with the code under test), issues
 * temporary credentials, consents at once at /authorize, exchanges a verifier for token
 * credentials, and answers signed calls under /api/ for the tokens it issued. Nonces are
 * single-use and timestamps must be within five minutes.
 */

export interface OAuth1Consumer {
  key: string;
  secret: string;
}

export interface TestOAuth1Server {
  url: string;
  requestTokenUrl: string;
  authorizationUrl: string;
  accessTokenUrl: string;
  /** Every request the server refused, with its reason, in arrival order. */
  refusals: Array<{ path: string; reason: string }>;
  /** The token credentials issued so far. */
  issuedAccessTokens(): string[];
  /**
   * While on, the resource owner refuses at /authorize: the callback gets `denied=<temporary
   * token>` and no verifier, as Twitter's OAuth 1.0a sends it.
   */
  denyAuthorization(deny: boolean): void;
  close(): Promise<void>;
}

interface Temporary {
  secret: string;
  consumer: string;
  callback: string;
  verifier: string | null;
  expiresAt: number;
}

const encode = (value: string) => encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const token = (prefix: string) => `${prefix}_${randomBytes(18).toString('base64url')}`;
const TEMPORARY_TTL_MS = 10 * 60 * 1000;
const CLOCK_SKEW_S = 300;

/** `OAuth k="v", …` → decoded fields; null when the header is not an OAuth one. */
function headerFields(header: string | undefined): Record<string, string> | null {
  if (!header?.startsWith('OAuth ')) return null;
  const fields: Record<string, string> = {};
  for (const match of header.slice(6).matchAll(/([\w]+)="([^"]*)"/g)) fields[match[1]!] = decodeURIComponent(match[2]!);
  return fields;
}

/** RFC 5849 3.4.1 computed here from the request as received. */
function baseString(req: IncomingMessage, url: URL, body: string, oauth: Record<string, string>): string {
  const params: Array<[string, string]> = [...url.searchParams];
  if ((req.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) params.push(...new URLSearchParams(body));
  for (const [name, value] of Object.entries(oauth)) if (name !== 'oauth_signature' && name !== 'realm') params.push([name, value]);
  const normalized = params
    .map(([name, value]) => [encode(name), encode(value)] as const)
    .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : x > y ? 1 : 0) : a < b ? -1 : 1))
    .map(([name, value]) => `${name}=${value}`)
    .join('&');
  return [req.method ?? 'GET', encode(`${url.origin}${url.pathname}`), encode(normalized)].join('&');
}

const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

export async function startOAuth1Server(options: { consumers?: OAuth1Consumer[] } = {}): Promise<TestOAuth1Server> {
  const consumers = options.consumers ?? [{ key: 'test-consumer', secret: 'test-consumer-secret' }];
  const temporaries = new Map<string, Temporary>();
  const accessTokens = new Map<string, { secret: string; consumer: string }>();
  const nonces = new Set<string>();
  const refusals: TestOAuth1Server['refusals'] = [];
  let base = '';
  let denying = false;

  /** The checked protocol parameters, or the reason the signature is refused. */
  function verify(req: IncomingMessage, url: URL, body: string, tokenSecret: (token: string | undefined) => string | undefined) {
    const oauth = headerFields(req.headers.authorization);
    if (!oauth) return { reason: 'no OAuth Authorization header' } as const;
    const consumer = consumers.find((item) => item.key === oauth['oauth_consumer_key']);
    if (!consumer) return { reason: 'unknown consumer key' } as const;
    if (oauth['oauth_signature_method'] !== 'HMAC-SHA1') return { reason: 'signature method must be HMAC-SHA1' } as const;
    const timestamp = Number(oauth['oauth_timestamp']);
    if (!Number.isFinite(timestamp) || Math.abs(Date.now() / 1000 - timestamp) > CLOCK_SKEW_S) return { reason: 'stale timestamp' } as const;
    const nonce = `${consumer.key}:${oauth['oauth_timestamp']}:${oauth['oauth_nonce'] ?? ''}`;
    if (!oauth['oauth_nonce'] || nonces.has(nonce)) return { reason: 'missing or reused nonce' } as const;
    const secret = tokenSecret(oauth['oauth_token']);
    if (secret === undefined) return { reason: 'unknown token' } as const;
    const expected = createHmac('sha1', `${encode(consumer.secret)}&${encode(secret)}`).update(baseString(req, url, body, oauth)).digest('base64');
    if (!same(expected, oauth['oauth_signature'] ?? '')) return { reason: 'invalid signature' } as const;
    nonces.add(nonce);
    return { oauth, consumer };
  }

  function refuse(res: ServerResponse, path: string, status: number, reason: string): void {
    refusals.push({ path, reason });
    res.writeHead(status, { 'content-type': 'application/x-www-form-urlencoded' }).end(new URLSearchParams({ oauth_problem: reason }).toString());
  }

  const sendForm = (res: ServerResponse, fields: Record<string, string>) =>
    res.writeHead(200, { 'content-type': 'application/x-www-form-urlencoded' }).end(new URLSearchParams(fields).toString());

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    const body = (await readBody(req, 1024 * 1024)).toString('utf8');
    if (url.pathname === '/oauth/request_token' && req.method === 'POST') {
      const checked = verify(req, url, body, (given) => (given === undefined ? '' : undefined));
      if ('reason' in checked) return refuse(res, url.pathname, 401, checked.reason);
      const callback = checked.oauth['oauth_callback'];
      if (!callback) return refuse(res, url.pathname, 400, 'oauth_callback is required');
      const issued = token('rt');
      temporaries.set(issued, { secret: token('rts'), consumer: checked.consumer.key, callback, verifier: null, expiresAt: Date.now() + TEMPORARY_TTL_MS });
      sendForm(res, { oauth_token: issued, oauth_token_secret: temporaries.get(issued)!.secret, oauth_callback_confirmed: 'true' });
      return;
    }
    if (url.pathname === '/oauth/authorize' && req.method === 'GET') {
      const given = url.searchParams.get('oauth_token') ?? '';
      const temporary = temporaries.get(given);
      if (!temporary || temporary.expiresAt < Date.now()) return refuse(res, url.pathname, 400, 'unknown or expired oauth_token');
      const target = new URL(temporary.callback);
      if (denying) {
        temporaries.delete(given);
        target.searchParams.set('denied', given);
        res.writeHead(302, { location: target.toString() }).end();
        return;
      }
      // The resource owner consents at once.
      temporary.verifier = token('v');
      target.searchParams.set('oauth_token', given);
      target.searchParams.set('oauth_verifier', temporary.verifier);
      res.writeHead(302, { location: target.toString() }).end();
      return;
    }
    if (url.pathname === '/oauth/access_token' && req.method === 'POST') {
      const checked = verify(req, url, body, (given) => (given === undefined ? undefined : temporaries.get(given)?.secret));
      if ('reason' in checked) return refuse(res, url.pathname, 401, checked.reason);
      const given = checked.oauth['oauth_token']!;
      const temporary = temporaries.get(given)!;
      if (temporary.consumer !== checked.consumer.key || temporary.expiresAt < Date.now()) return refuse(res, url.pathname, 401, 'token not issued to this consumer');
      if (!temporary.verifier || temporary.verifier !== checked.oauth['oauth_verifier']) return refuse(res, url.pathname, 401, 'wrong oauth_verifier');
      temporaries.delete(given);
      const access = token('at');
      const secret = token('ats');
      accessTokens.set(access, { secret, consumer: checked.consumer.key });
      sendForm(res, { oauth_token: access, oauth_token_secret: secret, user_id: 'oauth1-user' });
      return;
    }
    if (url.pathname.startsWith('/api/')) {
      const checked = verify(req, url, body, (given) => (given === undefined ? undefined : accessTokens.get(given)?.secret));
      if ('reason' in checked) return refuse(res, url.pathname, 401, checked.reason);
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ user: 'oauth1-user', token: checked.oauth['oauth_token'], path: url.pathname }));
      return;
    }
    refuse(res, url.pathname, 404, 'no such endpoint');
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) res.writeHead(error instanceof BodyTooLarge ? 413 : 500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: base,
    requestTokenUrl: `${base}/oauth/request_token`,
    authorizationUrl: `${base}/oauth/authorize`,
    accessTokenUrl: `${base}/oauth/access_token`,
    refusals,
    issuedAccessTokens: () => [...accessTokens.keys()],
    denyAuthorization: (deny) => {
      denying = deny;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
