import { createHash, randomBytes } from 'node:crypto';
import { type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { serveOnLoopback, sendJson } from './loopback-http.js';
import { BodyTooLarge, readBody } from './read-body.js';

/**
 * A real OAuth 2 authorization server (RFC 6749, PKCE per RFC 7636) on loopback, for tests that
 * need a provider: it issues opaque tokens, remembers them, rotates refresh tokens and answers
 * protected requests only for tokens it issued. Nothing here knows about Latchkey.
 */

export interface OAuthClient {
  client_id: string;
  client_secret: string;
  /** Exact redirect URIs accepted at /authorize; without any, every http(s) loopback URI is. */
  redirect_uris?: string[];
}

/** `basic` is client_secret_basic (HTTP Basic), `body` is client_secret_post (form fields). */
export type ClientAuthMethod = 'basic' | 'body';

/** Behaviour that tests may change while the server runs, through `setOptions`. */
export interface OAuthServerSettings {
  /** Which client authentication the token endpoint accepts. Default `either`. */
  clientAuth?: ClientAuthMethod | 'either';
  /** A refresh answers with a new refresh token and retires the old one. Default true. */
  rotateRefreshTokens?: boolean;
  /** A refresh answers without refresh_token; the old one then stays valid. Default false. */
  omitRefreshTokenOnRefresh?: boolean;
  /** The authorization_code grant answers with a refresh token. Default true. */
  issueRefreshTokens?: boolean;
  /** Access token lifetime in seconds, as announced and as enforced. Default 3600. */
  expiresIn?: number;
  /** Spread last into every successful token response, so it may also override standard fields. */
  extraTokenFields?: Record<string, unknown>;
  /** Every token response waits this long, to hold concurrent requests open. Default 0. */
  tokenDelayMs?: number;
  /** /authorize redirects back with `error=access_denied` instead of a code. Default false. */
  denyAuthorization?: boolean;
  /** /authorize refuses requests without an S256 code_challenge. Default false. */
  requirePkce?: boolean;
  /** How long an authorization code stays redeemable. Default 60 000 ms. */
  codeTtlMs?: number;
  /** The user that every authorization consents as (`sub` at /userinfo). Default `test-user`. */
  subject?: string;
  /** Authorization responses carry `iss` (RFC 9207), and the metadata says so. Default false. */
  sendIssuer?: boolean;
}

export interface OAuthServerOptions extends OAuthServerSettings {
  /** Registered clients. Default: one client `test-client` / `test-secret` without redirect URIs. */
  clients?: OAuthClient[];
}

export interface TokenRequestRecord {
  grantType: string | undefined;
  /** The client authentication the request presented (`none` when it presented neither). */
  clientAuth: ClientAuthMethod | 'none';
  /** The client_id from Basic credentials or the body, whether or not it authenticated. */
  clientId: string | undefined;
  /** The parsed form body, secrets included: this is a test double. */
  body: Record<string, string>;
  /** The status answered; undefined while the response is still pending. */
  status: number | undefined;
  /** When the request arrived (epoch ms). */
  at: number;
  /** When its answer was sent (epoch ms); undefined while it is pending. */
  answeredAt?: number;
}

export interface OAuthStats {
  authorizeRequests: number;
  tokenRequests: number;
  /** Token requests per grant_type; `other` counts unknown or missing grant types. */
  grants: { authorization_code: number; refresh_token: number; client_credentials: number; other: number };
  /** Every token request in arrival order. */
  tokenRequestLog: TokenRequestRecord[];
  /** Every access token issued since the last reset, still valid or not. */
  issuedAccessTokens(): string[];
  /** Every refresh token issued since the last reset, still valid or not. */
  issuedRefreshTokens(): string[];
  /** Clears the counters and lists; issued tokens keep their validity. */
  reset(): void;
}

/** What /userinfo and /api/* answer for a valid access token. */
export interface OAuthResourceEcho {
  sub: string;
  client_id: string;
  scope: string;
  token: string;
  path: string;
  method: string;
  query: Record<string, string>;
  headers: IncomingMessage['headers'];
  body: string;
}

export interface TestOAuthServer {
  /** The issuer: `http://127.0.0.1:<port>`. */
  url: string;
  authorizationUrl: string;
  tokenUrl: string;
  userinfoUrl: string;
  revocationUrl: string;
  /** The registered clients (live). */
  clients: readonly OAuthClient[];
  stats: OAuthStats;
  /** Registers a client; a missing id or secret is generated. */
  addClient(client?: Partial<OAuthClient>): OAuthClient;
  setOptions(changes: OAuthServerSettings): void;
  /** The next token request (of any grant) gets this answer instead; calls queue up. */
  failNextToken(status: number, body?: unknown, headers?: Record<string, string>): void;
  /** Every access token issued so far stops working (401 at /userinfo and /api/*). */
  revokeAccessTokens(): void;
  /** Every refresh token issued so far stops working (invalid_grant). */
  revokeRefreshTokens(): void;
  close(): Promise<void>;
}

interface AccessTokenRecord {
  clientId: string;
  subject: string;
  scope: string;
  expiresAt: number;
}

interface RefreshTokenRecord {
  clientId: string;
  subject: string;
  scope: string;
}

interface CodeRecord {
  clientId: string;
  subject: string;
  scope: string;
  /** The redirect_uri parameter as sent to /authorize; the token request must repeat it. */
  redirectUriParam: string | undefined;
  codeChallenge: string | undefined;
  expiresAt: number;
}

interface Answer {
  status: number;
  body: unknown;
  headers?: OutgoingHttpHeaders;
}

type ClientCheck = { client: OAuthClient } | { failure: Answer };

const MAX_BODY_BYTES = 1024 * 1024;

/** How the server behaves unless told otherwise (setOptions restores any of these). */
export const OAUTH_SERVER_DEFAULTS: Readonly<Required<OAuthServerSettings>> = {
  clientAuth: 'either',
  rotateRefreshTokens: true,
  omitRefreshTokenOnRefresh: false,
  issueRefreshTokens: true,
  expiresIn: 3600,
  extraTokenFields: {},
  tokenDelayMs: 0,
  denyAuthorization: false,
  requirePkce: false,
  codeTtlMs: 60_000,
  subject: 'test-user',
  sendIssuer: false,
};

export async function startOAuthServer(options: OAuthServerOptions = {}): Promise<TestOAuthServer> {
  const { clients: givenClients, ...givenSettings } = options;
  const settings: Required<OAuthServerSettings> = {
    ...OAUTH_SERVER_DEFAULTS,
    ...givenSettings,
  };
  const clients: OAuthClient[] = (givenClients ?? [{ client_id: 'test-client', client_secret: 'test-secret' }]).map(
    (client) => ({ ...client }),
  );

  const codes = new Map<string, CodeRecord>();
  const accessTokens = new Map<string, AccessTokenRecord>();
  const refreshTokens = new Map<string, RefreshTokenRecord>();
  const forcedTokenAnswers: Answer[] = [];
  const pendingTimers = new Set<NodeJS.Timeout>();
  let issuedAccess: string[] = [];
  let issuedRefresh: string[] = [];

  const stats: OAuthStats = {
    authorizeRequests: 0,
    tokenRequests: 0,
    grants: { authorization_code: 0, refresh_token: 0, client_credentials: 0, other: 0 },
    tokenRequestLog: [],
    issuedAccessTokens: () => [...issuedAccess],
    issuedRefreshTokens: () => [...issuedRefresh],
    reset() {
      stats.authorizeRequests = 0;
      stats.tokenRequests = 0;
      stats.grants = { authorization_code: 0, refresh_token: 0, client_credentials: 0, other: 0 };
      stats.tokenRequestLog.length = 0;
      issuedAccess = [];
      issuedRefresh = [];
    },
  };

  function findClient(clientId: string | null | undefined): OAuthClient | undefined {
    return clients.find((client) => client.client_id === clientId);
  }

  function wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        pendingTimers.delete(timer);
        resolve();
      }, ms);
      pendingTimers.add(timer);
    });
  }

  function authorize(url: URL, res: ServerResponse): void {
    stats.authorizeRequests += 1;
    const query = url.searchParams;
    const client = findClient(query.get('client_id'));
    // Without a trusted client and redirect URI there is nowhere safe to send an error (§4.1.2.1).
    if (!client) return sendJson(res, 400, oauthError('invalid_request', 'unknown client_id'));
    const requested = query.get('redirect_uri') ?? undefined;
    const registered = client.redirect_uris ?? [];
    let redirectUri: string;
    if (registered.length > 0) {
      if (requested === undefined && registered.length === 1) redirectUri = registered[0] as string;
      else if (requested !== undefined && registered.includes(requested)) redirectUri = requested;
      else return sendJson(res, 400, oauthError('invalid_request', 'redirect_uri is not registered for this client'));
    } else if (requested !== undefined && isLoopbackHttpUrl(requested)) {
      redirectUri = requested;
    } else {
      return sendJson(res, 400, oauthError('invalid_request', 'redirect_uri must be an http(s) loopback URI'));
    }

    const state = query.get('state');
    const redirectWith = (params: Record<string, string>): void => {
      const target = new URL(redirectUri);
      for (const [name, value] of Object.entries(params)) target.searchParams.set(name, value);
      if (state !== null) target.searchParams.set('state', state);
      if (settings.sendIssuer) target.searchParams.set('iss', base);
      res.writeHead(302, { location: target.toString(), 'cache-control': 'no-store' }).end();
    };

    const challenge = query.get('code_challenge') ?? undefined;
    if (query.get('response_type') !== 'code') {
      return redirectWith({ error: 'unsupported_response_type', error_description: 'only response_type=code is supported' });
    }
    if (challenge !== undefined && query.get('code_challenge_method') !== 'S256') {
      return redirectWith({ error: 'invalid_request', error_description: 'code_challenge_method must be S256' });
    }
    if (challenge === undefined && settings.requirePkce) {
      return redirectWith({ error: 'invalid_request', error_description: 'code_challenge is required' });
    }
    if (settings.denyAuthorization) {
      return redirectWith({ error: 'access_denied', error_description: 'the resource owner denied the request' });
    }

    const code = randomToken('code');
    codes.set(code, {
      clientId: client.client_id,
      subject: settings.subject,
      scope: query.get('scope') ?? '',
      redirectUriParam: requested,
      codeChallenge: challenge,
      expiresAt: Date.now() + settings.codeTtlMs,
    });
    redirectWith({ code });
  }

  async function token(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') return sendJson(res, 405, oauthError('invalid_request', 'use POST'), { allow: 'POST' });
    const raw = await readBody(req, MAX_BODY_BYTES);
    const form = new URLSearchParams(raw.toString('utf8'));
    const basic = parseBasic(req.headers.authorization);
    const grantType = form.get('grant_type') ?? undefined;

    const record: TokenRequestRecord = {
      grantType,
      clientAuth: basic ? 'basic' : form.has('client_secret') ? 'body' : 'none',
      clientId: basic?.clientId ?? form.get('client_id') ?? undefined,
      body: Object.fromEntries(form),
      status: undefined,
      at: Date.now(),
    };
    stats.tokenRequests += 1;
    stats.tokenRequestLog.push(record);
    if (grantType === 'authorization_code' || grantType === 'refresh_token' || grantType === 'client_credentials') {
      stats.grants[grantType] += 1;
    } else {
      stats.grants.other += 1;
    }

    // The forced answer belongs to the request that arrived next, not the one answered next.
    const forced = forcedTokenAnswers.shift();
    if (settings.tokenDelayMs > 0) await wait(settings.tokenDelayMs);
    const answer = forced ?? answerTokenRequest(req, form, basic);
    record.status = answer.status;
    record.answeredAt = Date.now();
    sendAnswer(res, answer, { 'cache-control': 'no-store', pragma: 'no-cache' });
  }

  function answerTokenRequest(req: IncomingMessage, form: URLSearchParams, basic: BasicCredentials | undefined): Answer {
    const contentType = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
    if (contentType !== 'application/x-www-form-urlencoded') {
      return { status: 400, body: oauthError('invalid_request', 'the body must be application/x-www-form-urlencoded') };
    }
    const repeated = [...new Set(form.keys())].find((name) => form.getAll(name).length > 1);
    if (repeated) return { status: 400, body: oauthError('invalid_request', `${repeated} is repeated`) };

    const checked = authenticateClient(form, basic);
    if ('failure' in checked) return checked.failure;
    const { client } = checked;

    switch (form.get('grant_type')) {
      case 'authorization_code':
        return redeemCode(client, form);
      case 'refresh_token':
        return refresh(client, form);
      case 'client_credentials':
        return issue(client, { subject: client.client_id, scope: form.get('scope') ?? '', refreshToken: undefined });
      case null:
        return { status: 400, body: oauthError('invalid_request', 'grant_type is required') };
      default:
        return { status: 400, body: oauthError('unsupported_grant_type', 'this grant type is not supported') };
    }
  }

  function authenticateClient(form: URLSearchParams, basic: BasicCredentials | undefined): ClientCheck {
    const invalidClient = (description: string): ClientCheck => ({
      failure: {
        status: 401,
        body: oauthError('invalid_client', description),
        headers: { 'www-authenticate': 'Basic realm="oauth"' },
      },
    });
    const bodyId = form.get('client_id');
    const bodySecret = form.get('client_secret');
    let clientId: string | null;
    let secret: string | null;
    if (basic) {
      // RFC 6749 §2.3: a client must not use more than one authentication method per request.
      if (bodySecret !== null) {
        return { failure: { status: 400, body: oauthError('invalid_request', 'more than one client authentication method') } };
      }
      if (bodyId !== null && bodyId !== basic.clientId) {
        return { failure: { status: 400, body: oauthError('invalid_request', 'client_id differs from the Basic credentials') } };
      }
      if (settings.clientAuth === 'body') return invalidClient('client_secret_basic is not accepted; send the credentials in the body');
      clientId = basic.clientId;
      secret = basic.secret;
    } else if (bodySecret !== null) {
      if (settings.clientAuth === 'basic') return invalidClient('client_secret_post is not accepted; use HTTP Basic');
      clientId = bodyId;
      secret = bodySecret;
    } else {
      return invalidClient('client authentication is required');
    }
    const client = findClient(clientId);
    if (!client || client.client_secret !== secret) return invalidClient('client authentication failed');
    return { client };
  }

  function redeemCode(client: OAuthClient, form: URLSearchParams): Answer {
    const code = form.get('code');
    if (!code) return { status: 400, body: oauthError('invalid_request', 'code is required') };
    const record = codes.get(code);
    if (!record || record.expiresAt <= Date.now()) {
      codes.delete(code);
      return { status: 400, body: oauthError('invalid_grant', 'the code is unknown, used or expired') };
    }
    if (record.clientId !== client.client_id) {
      return { status: 400, body: oauthError('invalid_grant', 'the code was issued to another client') };
    }
    if (record.redirectUriParam !== undefined && form.get('redirect_uri') !== record.redirectUriParam) {
      return { status: 400, body: oauthError('invalid_grant', 'redirect_uri differs from the authorization request') };
    }
    if (record.codeChallenge !== undefined) {
      const verifier = form.get('code_verifier');
      if (!verifier || s256(verifier) !== record.codeChallenge) {
        return { status: 400, body: oauthError('invalid_grant', 'code_verifier does not match the code_challenge') };
      }
    }
    // Redeemed only on success, so a test may present a wrong verifier and then the right one.
    codes.delete(code);
    const refreshToken = settings.issueRefreshTokens ? newRefreshToken(client.client_id, record.subject, record.scope) : undefined;
    return issue(client, { subject: record.subject, scope: record.scope, refreshToken });
  }

  function refresh(client: OAuthClient, form: URLSearchParams): Answer {
    const presented = form.get('refresh_token');
    if (!presented) return { status: 400, body: oauthError('invalid_request', 'refresh_token is required') };
    const record = refreshTokens.get(presented);
    if (!record || record.clientId !== client.client_id) {
      return { status: 400, body: oauthError('invalid_grant', 'the refresh token is unknown, revoked or rotated') };
    }
    const requestedScope = form.get('scope');
    if (requestedScope !== null) {
      const granted = new Set(splitScope(record.scope));
      if (!splitScope(requestedScope).every((scope) => granted.has(scope))) {
        return { status: 400, body: oauthError('invalid_scope', 'a refresh cannot widen the granted scope') };
      }
    }
    const scope = requestedScope ?? record.scope;
    let refreshToken: string | undefined;
    if (settings.omitRefreshTokenOnRefresh) {
      refreshToken = undefined;
    } else if (settings.rotateRefreshTokens) {
      refreshTokens.delete(presented);
      refreshToken = newRefreshToken(client.client_id, record.subject, record.scope);
    } else {
      refreshToken = presented;
    }
    return issue(client, { subject: record.subject, scope, refreshToken });
  }

  function newRefreshToken(clientId: string, subject: string, scope: string): string {
    const refreshToken = randomToken('rt');
    refreshTokens.set(refreshToken, { clientId, subject, scope });
    issuedRefresh.push(refreshToken);
    return refreshToken;
  }

  function issue(client: OAuthClient, grant: { subject: string; scope: string; refreshToken: string | undefined }): Answer {
    const accessToken = randomToken('at');
    accessTokens.set(accessToken, {
      clientId: client.client_id,
      subject: grant.subject,
      scope: grant.scope,
      expiresAt: Date.now() + settings.expiresIn * 1000,
    });
    issuedAccess.push(accessToken);
    return {
      status: 200,
      body: {
        access_token: accessToken,
        token_type: 'Bearer',
        expires_in: settings.expiresIn,
        ...(grant.refreshToken === undefined ? {} : { refresh_token: grant.refreshToken }),
        ...(grant.scope === '' ? {} : { scope: grant.scope }),
        ...settings.extraTokenFields,
      },
    };
  }

  async function revoke(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') return sendJson(res, 405, oauthError('invalid_request', 'use POST'), { allow: 'POST' });
    const form = new URLSearchParams((await readBody(req, MAX_BODY_BYTES)).toString('utf8'));
    const checked = authenticateClient(form, parseBasic(req.headers.authorization));
    if ('failure' in checked) return sendAnswer(res, checked.failure);
    const presented = form.get('token');
    if (!presented) return sendJson(res, 400, oauthError('invalid_request', 'token is required'));
    // RFC 7009 §2.2: unknown tokens and tokens of other clients still get 200, and stay untouched.
    if (accessTokens.get(presented)?.clientId === checked.client.client_id) accessTokens.delete(presented);
    if (refreshTokens.get(presented)?.clientId === checked.client.client_id) refreshTokens.delete(presented);
    res.writeHead(200, { 'cache-control': 'no-store' }).end();
  }

  async function protectedResource(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const body = await readBody(req, MAX_BODY_BYTES);
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match) return sendJson(res, 401, oauthError('invalid_request', 'a Bearer token is required'), { 'www-authenticate': 'Bearer realm="oauth"' });
    const presented = match[1] as string;
    const record = accessTokens.get(presented);
    if (!record || record.expiresAt <= Date.now()) {
      return sendJson(res, 401, oauthError('invalid_token', 'the access token is unknown, revoked or expired'), {
        'www-authenticate': 'Bearer realm="oauth", error="invalid_token"',
      });
    }
    const echo: OAuthResourceEcho = {
      sub: record.subject,
      client_id: record.clientId,
      scope: record.scope,
      token: presented,
      path: url.pathname,
      method: req.method ?? 'GET',
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body: body.toString('utf8'),
    };
    sendJson(res, 200, echo);
  }

  async function route(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', base);
    const path = url.pathname;
    if (path === '/authorize' && (req.method === 'GET' || req.method === 'HEAD')) return authorize(url, res);
    if (path === '/token') return token(req, res);
    if (path === '/revoke') return revoke(req, res);
    if (path === '/userinfo' || path.startsWith('/api/')) return protectedResource(req, res, url);
    if (path === '/.well-known/oauth-authorization-server') return sendJson(res, 200, metadata());
    await readBody(req, MAX_BODY_BYTES);
    sendJson(res, 404, { error: 'not_found', error_description: `nothing at ${req.method} ${path}` });
  }

  function metadata(): Record<string, unknown> {
    const authMethods = { basic: ['client_secret_basic'], body: ['client_secret_post'], either: ['client_secret_basic', 'client_secret_post'] };
    return {
      issuer: base,
      authorization_endpoint: `${base}/authorize`,
      token_endpoint: `${base}/token`,
      revocation_endpoint: `${base}/revoke`,
      userinfo_endpoint: `${base}/userinfo`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: authMethods[settings.clientAuth],
      authorization_response_iss_parameter_supported: settings.sendIssuer,
    };
  }

  const server = await serveOnLoopback(route, (res, error) => {
    const status = error instanceof BodyTooLarge ? 413 : 500;
    sendJson(res, status, oauthError(status === 413 ? 'invalid_request' : 'server_error', String(error)));
  });
  const base = server.url;

  return {
    url: base,
    authorizationUrl: `${base}/authorize`,
    tokenUrl: `${base}/token`,
    userinfoUrl: `${base}/userinfo`,
    revocationUrl: `${base}/revoke`,
    clients,
    stats,
    addClient(client = {}) {
      const registered: OAuthClient = {
        client_id: client.client_id ?? randomToken('client'),
        client_secret: client.client_secret ?? randomToken('secret'),
        ...(client.redirect_uris ? { redirect_uris: [...client.redirect_uris] } : {}),
      };
      clients.push(registered);
      return registered;
    },
    setOptions(changes) {
      Object.assign(settings, changes);
    },
    failNextToken(status, body = oauthError('server_error', 'forced failure'), headers = {}) {
      forcedTokenAnswers.push({ status, body, headers });
    },
    revokeAccessTokens() {
      accessTokens.clear();
    },
    revokeRefreshTokens() {
      refreshTokens.clear();
    },
    async close() {
      for (const timer of pendingTimers) clearTimeout(timer);
      pendingTimers.clear();
      await server.close();
    },
  };
}

interface BasicCredentials {
  clientId: string;
  secret: string;
}

/** HTTP Basic client credentials, form-urlencoded before base64 as RFC 6749 §2.3.1 asks. */
function parseBasic(header: string | undefined): BasicCredentials | undefined {
  const match = /^Basic\s+(\S+)\s*$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return { clientId: formDecode(decoded), secret: '' };
  return { clientId: formDecode(decoded.slice(0, colon)), secret: formDecode(decoded.slice(colon + 1)) };
}

function formDecode(value: string): string {
  try {
    return decodeURIComponent(value.replace(/\+/g, ' '));
  } catch {
    return value;
  }
}

function isLoopbackHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'http:' || url.protocol === 'https:') && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  } catch {
    return false;
  }
}

function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

function splitScope(scope: string): string[] {
  return scope.split(' ').filter((part) => part !== '');
}

function randomToken(prefix: string): string {
  return `${prefix}-${randomBytes(24).toString('base64url')}`;
}

function oauthError(error: string, description: string): { error: string; error_description: string } {
  return { error, error_description: description };
}

function sendAnswer(res: ServerResponse, answer: Answer, extraHeaders: OutgoingHttpHeaders = {}): void {
  if (typeof answer.body === 'string') {
    res.writeHead(answer.status, { 'content-type': 'text/plain; charset=utf-8', ...extraHeaders, ...answer.headers }).end(answer.body);
    return;
  }
  sendJson(res, answer.status, answer.body, { ...extraHeaders, ...answer.headers });
}
