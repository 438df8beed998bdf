import { z } from 'zod';
import { defineRequest } from './define.js';

/**
 * The proxy's wire. `proxy.request` carries calls with binary bodies: each call's metadata
 * (JSON, validated with these schemas on both sides) and body travel as one frame, several
 * frames to a message (the framing is `@latchkey/proxy-hop`); bodies over the bus's inline limit
 * travel as pull streams.
 */
export const PROXY_SUBJECT = 'proxy.request';
/**
 * A proxy replica sends, every `PROXY_KEEPALIVE_MS` until it answers, a keepalive for each call
 * it holds; a caller that hears nothing for a few intervals knows the replica is gone (or that
 * none runs) and answers 503 instead of waiting out its deadline.
 */
export const PROXY_KEEPALIVE_MS = 1000;

/** How long a caller waits for a proxied call: every attempt may take the upstream timeout, and each retry waits up to 10 s. */
export function proxyDeadlineMs(upstreamTimeoutMs: number, retries: number): number {
  return (upstreamTimeoutMs + 10_000) * (retries + 1) + 5_000;
}

/**
 * The header the gateway marks its own error answers with (its value the error code), so that a
 * client tells them from a provider's answers passed on by the proxy. The proxy drops it from
 * providers' answers: no provider can pass its answer off as the gateway's error.
 */
export const OWN_ERROR_HEADER = 'Latchkey-Error';

/** Hop-by-hop headers (RFC 9110 §7.6.1): they describe one connection, not the message, and never cross the proxy. */
export const HOP_BY_HOP_HEADERS: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/**
 * A host the proxy may send a connection's credentials to besides its provider's base URL
 * (`Base-Url-Override`): a DNS name, an IPv4 address or a bracketed IPv6 one (as a URL writes
 * it), with an optional port (`api.example.com`, `api.example.com:8443`), or `*.` and a name of
 * at least two labels for its subdomains (`*.example.com`); letter case does not matter. Matched
 * against the override URL's host exactly, so no port means the scheme's default port. Declared
 * by the catalog (`proxy.allowed_hosts`) and per integration. The address policy still applies.
 */
export const allowedHostSchema = z
  .string()
  .max(260)
  .regex(
    /^((\*\.(?=[a-z0-9-]+\.))?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?|\[[0-9a-f:.]+\])(:[0-9]{1,5})?$/i,
    'a host name or [IPv6] with an optional port, or *. and a domain (api.example.com, api.example.com:8443, *.example.com)',
  );
export const allowedHostsSchema = z.array(allowedHostSchema).max(50);

const headerList = z.array(z.tuple([z.string(), z.string()]));
const body = z.union([z.literal('inline'), z.object({ stream: z.string() })]);

/** The longest deadline a proxy call names: a day. */
export const PROXY_DEADLINE_MAX_MS = 86_400_000;

/**
 * The statuses `Retry-On` may add to the retried set: errors only. A success or a redirect
 * retried would send a call the provider took again (a POST twice), each retry costing the
 * connection's quota at the provider for one call at the gateway.
 */
export const RETRY_ON_STATUSES = { min: 400, max: 599 } as const;

/** The longest `tracestate` a proxy call carries (W3C asks to pass on at least 512 characters). */
export const PROXY_TRACESTATE_MAX = 512;

export const proxyRequestMeta = z.object({
  environment_id: z.string(),
  key_id: z.string(),
  connection_id: z.string(),
  provider_config_key: z.string(),
  method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']),
  /** Path on the provider's API, without the leading slash. */
  path: z.string(),
  /** The raw query string, without `?`. */
  query: z.string(),
  /** The caller's headers, less ours; the proxy service decides which reach the provider. */
  headers: headerList,
  /**
   * The positions in `headers` of those the caller sent as `service-proxy-<name>` (each listed
   * under `<name>`); absent when there is none. Only these may carry the caller's own
   * `Authorization` or `Cookie` to the provider. A separate member rather than a prefix kept on
   * the name, so that an older proxy (which strips a member it does not know) still forwards the
   * header under its name, under its old rule, and an older caller's call (which has no such
   * member) forwards none of the two.
   */
  explicit_headers: z.array(z.number().int().min(0)).optional(),
  retries: z.number().int().min(0).max(10),
  retry_on: z.array(z.number().int().min(RETRY_ON_STATUSES.min).max(RETRY_ON_STATUSES.max)),
  /**
   * How long the caller waits for the answer's head, from when it sent the call: the replica
   * takes no retry, replay or wait past it, so it never goes on with a call its caller gave up.
   */
  deadline_ms: z.number().int().min(1).max(PROXY_DEADLINE_MAX_MS).optional(),
  base_url_override: z.string().optional(),
  decompress: z.boolean().optional(),
  body,
  /** The caller's request id, for the replica's logs. */
  request_id: z.string().max(128).optional(),
  /** The caller's W3C trace context while tracing is on (the hop's own frames carry no headers). */
  traceparent: z.string().max(128).optional(),
  tracestate: z.string().max(PROXY_TRACESTATE_MAX).optional(),
});
export type ProxyRequestMeta = z.infer<typeof proxyRequestMeta>;

export const proxyReplyMeta = z.union([
  z.object({ ok: z.literal(true), status: z.number().int(), headers: headerList, body }),
  z.object({
    ok: z.literal(false),
    error: z.object({ code: z.string(), message: z.string(), payload: z.record(z.string(), z.unknown()).optional() }),
  }),
]);
export type ProxyReplyMeta = z.infer<typeof proxyReplyMeta>;

/*
 * The hop reads one request meta per call on the replica, and one reply meta per call on the
 * caller: zod's general walk over a schema costs more there than the plain checks below. A value
 * of exactly a schema's shape (no other member, no member set to undefined) passes as it is;
 * anything else goes to zod, which strips unknown members and names each problem. The unit test
 * holds the two to the same answers; the type of `REQUEST_CHECKS` makes every member of the
 * schema have its check.
 */
type Check = (value: unknown) => boolean;
const isString: Check = (value) => typeof value === 'string';
const stringAtMost =
  (max: number): Check =>
  (value) =>
    typeof value === 'string' && value.length <= max;
const integerIn =
  (min: number, max: number): Check =>
  (value) =>
    Number.isSafeInteger(value) && (value as number) >= min && (value as number) <= max;
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function isHeaderList(value: unknown): boolean {
  if (!Array.isArray(value)) return false;
  for (const pair of value) if (!Array.isArray(pair) || pair.length !== 2 || !isString(pair[0]) || !isString(pair[1])) return false;
  return true;
}

function isBody(value: unknown): boolean {
  if (value === 'inline') return true;
  if (!isRecord(value) || !isString(value['stream'])) return false;
  for (const key in value) if (key !== 'stream') return false;
  return true;
}

const methods: ReadonlySet<unknown> = new Set(proxyRequestMeta.shape.method.options);
const isRetriedStatus = integerIn(RETRY_ON_STATUSES.min, RETRY_ON_STATUSES.max);
const isPosition = integerIn(0, Number.MAX_SAFE_INTEGER);
const REQUEST_CHECKS: Record<keyof ProxyRequestMeta, Check> = {
  environment_id: isString,
  key_id: isString,
  connection_id: isString,
  provider_config_key: isString,
  method: (value) => methods.has(value),
  path: isString,
  query: isString,
  headers: isHeaderList,
  explicit_headers: (value) => Array.isArray(value) && value.every(isPosition),
  retries: integerIn(0, 10),
  retry_on: (value) => Array.isArray(value) && value.every(isRetriedStatus),
  deadline_ms: integerIn(1, PROXY_DEADLINE_MAX_MS),
  base_url_override: isString,
  decompress: (value) => typeof value === 'boolean',
  body: isBody,
  request_id: stringAtMost(128),
  traceparent: stringAtMost(128),
  tracestate: stringAtMost(PROXY_TRACESTATE_MAX),
};
const requestChecks = new Map<string, Check>(Object.entries(REQUEST_CHECKS));
const requestRequired = Object.keys(REQUEST_CHECKS).filter((key) => !proxyRequestMeta.shape[key as keyof ProxyRequestMeta].safeParse(undefined).success);

function isRequestMeta(value: unknown): value is ProxyRequestMeta {
  if (!isRecord(value)) return false;
  for (const key in value) {
    const check = requestChecks.get(key);
    if (check === undefined || !check(value[key])) return false;
  }
  for (const key of requestRequired) if (!(key in value)) return false;
  return true;
}

/** `proxyRequestMeta.safeParse`, with the common well-formed call checked without zod. */
export function safeParseProxyRequestMeta(value: unknown): ReturnType<typeof proxyRequestMeta.safeParse> {
  return isRequestMeta(value) ? { success: true, data: value } : proxyRequestMeta.safeParse(value);
}

/** `proxyReplyMeta.parse` (throws zod's error), with the common answer (`ok: true`) checked without zod. */
export function parseProxyReplyMeta(value: unknown): ProxyReplyMeta {
  if (isRecord(value) && value['ok'] === true && Number.isSafeInteger(value['status']) && isHeaderList(value['headers']) && isBody(value['body'])) {
    let members = 0;
    for (const _key in value) members++;
    if (members === 4) return value as ProxyReplyMeta;
  }
  return proxyReplyMeta.parse(value);
}

/**
 * How to authenticate calls for a connection, worked out by the vault from the connection's
 * credentials and the provider entry: the base URL with connection config filled in, headers
 * and query parameters to add, and OAuth 1 material when requests must be signed. It carries
 * plaintext secrets, so only the vault answers it and only the proxy asks (`nats-access.ts`).
 */
export const proxyCredentials = z.object({
  /** The connection's internal id: `vault.connection.changed` names it when it must be dropped. */
  id: z.string(),
  provider: z.string(),
  auth_mode: z.string(),
  /** When the injected token expires; the proxy asks again inside the refresh window. */
  expires_at: z.string().nullable(),
  base_url: z.string().optional(),
  /**
   * Hosts besides `base_url`'s that a `Base-Url-Override` may name and still get the credentials
   * (the catalog's and the integration's `allowed_hosts`). The proxy refuses any other.
   */
  allowed_hosts: z.array(z.string()).optional(),
  headers: z.record(z.string(), z.string()),
  query: z.record(z.string(), z.string()),
  oauth1: z
    .object({
      consumer_key: z.string(),
      consumer_secret: z.string(),
      token: z.string(),
      token_secret: z.string(),
      /** HMAC-SHA1 when absent. */
      signature_method: z.enum(['HMAC-SHA1', 'HMAC-SHA256']).optional(),
      /** The Authorization header's `realm`, when the provider wants one. */
      realm: z.string().optional(),
    })
    .optional(),
  decompress: z.boolean(),
});
export type ProxyCredentials = z.infer<typeof proxyCredentials>;

export const proxyContracts = {
  /** Fresh credentials for a proxied call: refreshed first when inside the window or forced. */
  getCredentials: defineRequest(
    'vault.credentials.get',
    z.object({
      environment_id: z.string(),
      key_id: z.string(),
      provider_config_key: z.string(),
      connection_id: z.string(),
      force_refresh: z.boolean(),
    }),
    proxyCredentials,
    // The vault audits every answer under the caller NATS authenticated.
    { perCaller: true },
  ),
  /**
   * Candidate credentials tried at the provider before a connect flow saves them: each endpoint
   * is called with the injection worked out by the vault, under the proxy's address policy,
   * without retries. Carries plaintext secrets: only the vault asks.
   */
  verifyCredentials: defineRequest(
    'proxy.verify',
    z.object({
      credentials: proxyCredentials,
      method: z.enum(['GET', 'POST']),
      endpoints: z.array(z.string().max(2048)).min(1).max(5),
      base_url_override: z.string().optional(),
      headers: z.record(z.string(), z.string()),
      timeout_ms: z.number().int().positive().max(60_000),
    }),
    z.object({ results: z.array(z.union([z.object({ endpoint: z.string(), status: z.number().int() }), z.object({ endpoint: z.string(), error: z.string() })])) }),
  ),
} as const;
