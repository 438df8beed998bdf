import type { IncomingMessage } from 'node:http';
import { RETRY_ON_STATUSES, type ProxyRequestMeta } from '@latchkey/contracts';
import { AppError, type ErrorItem } from '@latchkey/errors';
import { callProxy, type ProxyResponse } from '@latchkey/proxy-hop';
import { headerValue, readConnectionHeaders } from '../../http/connection-headers.js';
import { defineBareRoute } from '../../http/define-route.js';
import { writeChunks } from '../../http/write-chunks.js';

/**
 * Ours: the API key, the request id (it travels in the call) and the proxy's settings, read
 * here. Every other header goes as it came, `Connection`, `Host` and `Cookie` included: the proxy
 * service applies the one header policy (hop-by-hop, Host, Cookie, forwarding headers,
 * credentials) to every caller's call. A `service-proxy-<name>` header goes as `<name>`, its
 * position listed in the call's `explicit_headers`: the policy lets the caller's own
 * `Authorization` and `Cookie` through only so.
 */
const NOT_FORWARDED = new Set([
  'authorization',
  'x-request-id',
  'connection-id',
  'provider-config-key',
  'retries',
  'retry-on',
  'base-url-override',
  'decompress',
]);
const FORWARD_PREFIX = 'service-proxy-';
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

/** Reads the proxy's own headers; each problem is listed, as for any validation error. */
function configuration(req: IncomingMessage) {
  const errors: ErrorItem[] = [];
  const header = (name: string) => headerValue(req, name);
  const connection = readConnectionHeaders(req, errors);
  const retriesText = header('retries') ?? '0';
  const retries = /^\d{1,2}$/.test(retriesText) && Number(retriesText) <= 10 ? Number(retriesText) : -1;
  if (retries < 0) errors.push({ code: 'invalid_value', message: 'a whole number from 0 to 10', path: 'retries' });
  const retryOn = (header('retry-on') ?? '')
    .split(',')
    .map((code) => code.trim())
    .filter(Boolean)
    .map(Number);
  if (retryOn.some((code) => !Number.isInteger(code) || code < RETRY_ON_STATUSES.min || code > RETRY_ON_STATUSES.max)) {
    errors.push({ code: 'invalid_value', message: `comma-separated HTTP error statuses (${RETRY_ON_STATUSES.min} to ${RETRY_ON_STATUSES.max})`, path: 'retry-on' });
  }
  const decompress = header('decompress');
  if (decompress !== undefined && decompress !== 'true' && decompress !== 'false') {
    errors.push({ code: 'invalid_value', message: 'true or false', path: 'decompress' });
  }
  const override = header('base-url-override');
  if (override !== undefined && !/^https?:\/\/[^\s]+$/i.test(override)) {
    errors.push({ code: 'invalid_value', message: 'an http(s) URL', path: 'base-url-override' });
  }
  const method = req.method ?? '';
  if (!METHODS.has(method)) errors.push({ code: 'invalid_value', message: `method ${method} is not proxied`, path: 'method' });
  if (errors.length > 0) throw new AppError('invalid_headers', 'Invalid proxy headers', { errors });
  return {
    ...connection,
    retries,
    retry_on: retryOn,
    ...(override === undefined ? {} : { base_url_override: override }),
    ...(decompress === undefined ? {} : { decompress: decompress === 'true' }),
  };
}

/**
 * Adds the caller's headers, less ours, to `headers` (the proxy decides which reach the
 * provider), and returns the positions of those it sent with the prefix, or undefined when there
 * is none (most calls: nothing more is made for them).
 */
function forwardHeaders(req: IncomingMessage, headers: Array<[string, string]>): number[] | undefined {
  let explicit: number[] | undefined;
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (lower.startsWith(FORWARD_PREFIX)) {
      (explicit ??= []).push(headers.length);
      headers.push([name.slice(FORWARD_PREFIX.length), req.rawHeaders[i + 1]!]);
    } else if (!NOT_FORWARDED.has(lower)) headers.push([name, req.rawHeaders[i + 1]!]);
  }
  return explicit;
}

/** The `Retry-After` (seconds) of a 503 from the proxy hop: replicas come and go within seconds. */
const PROXY_RETRY_AFTER_S = 1;

/** Whether an answer of this status carries a body (RFC 9110 §6.4.1): not 1xx, 204 or 304. */
const hasBody = (status: number) => status >= 200 && status !== 204 && status !== 304;

/**
 * `/proxy/{anyPath}`: forwards the call to the provider through the proxy client (a proxy
 * replica injects the connection's credentials). The answer comes back as the provider gave it,
 * bodies of any size either way.
 */
export const proxyRequest = defineBareRoute({
  prefix: '/proxy',
  scope: 'environment:proxy',
  doc: {
    path: '/proxy/{path}',
    methods: ['get', 'post', 'put', 'patch', 'delete'],
    summary: "Call the provider's API with the connection's credentials injected",
    description:
      "`{path}` is any path on the provider's base URL (slashes included); the query, headers and body go to the provider " +
      "and its answer comes back as it was given (less any `Latchkey-Error` header: that one marks the gateway's own errors). " +
      'Optional headers: `Retries`, `Retry-On`, `Base-Url-Override`, `Decompress`. ' +
      'HEAD and OPTIONS are proxied too.',
    contentType: '*/*',
    headers: ['Connection-Id', 'Provider-Config-Key'],
    errors: [
      'invalid_uri_params',
      'unknown_connection',
      'unknown_provider_config',
      'refresh_token_external_error',
      'connection_refresh_backoff',
      'connection_refresh_exhausted',
      'upstream_not_allowed',
      'upstream_unreachable',
      'upstream_timeout',
      'payload_too_large',
    ],
  },
  handler: async ({ deps, key, req, res, ownHeaders }) => {
    const settings = configuration(req);
    const url = req.url ?? '/proxy';
    const queryAt = url.indexOf('?');
    const headers: Array<[string, string]> = [];
    const explicit = forwardHeaders(req, headers);
    const meta: Omit<ProxyRequestMeta, 'body'> = {
      environment_id: key.environmentId,
      key_id: key.keyId,
      method: req.method as ProxyRequestMeta['method'],
      path: (queryAt < 0 ? url : url.slice(0, queryAt)).replace(/^\/proxy\/?/, ''),
      query: queryAt < 0 ? '' : url.slice(queryAt + 1),
      headers,
      ...settings,
    };
    if (explicit) meta.explicit_headers = explicit;
    const body = req.method === 'GET' || req.method === 'HEAD' ? new Uint8Array(0) : (req as AsyncIterable<Uint8Array>);
    let reply: ProxyResponse;
    try {
      reply = await callProxy(deps.bus, { meta, body, timeoutMs: deps.config.PROXY_TIMEOUT_MS });
    } catch (error) {
      // A replica that holds all the calls it may, or stopped, or went silent: another one takes
      // the call a moment later.
      if (error instanceof AppError && error.code === 'service_unavailable') ownHeaders.setHeader('Retry-After', PROXY_RETRY_AFTER_S);
      throw error;
    }

    // The provider's headers as they came, after ours; a whole body's length as node would add it
    // (not for HEAD, whose headers describe the body a GET would have).
    const { inline } = reply;
    const bodyLength = inline && req.method !== 'HEAD' && hasBody(reply.status) ? inline.length : undefined;
    res.writeHead(reply.status, ownHeaders.with(reply.headers, bodyLength));
    if (inline) {
      res.end(inline);
    } else {
      const stream = reply.chunks();
      res.once('close', () => void stream.return(undefined));
      await writeChunks(res, stream);
    }
  },
});
