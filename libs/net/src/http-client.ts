import { Agent as HttpAgent, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import got, { type Method } from 'got';
import type { AddressPolicy } from './address-policy.js';
import { checkUrlHost, createSafeLookup, UpstreamNotAllowedError, type ResolveAll } from './safe-lookup.js';

/**
 * The one outbound HTTP client for ordinary calls of every service (token endpoints, OAuth 1
 * endpoints, webhook deliveries): got, with the address policy applied where it cannot be
 * bypassed. IP-literal hosts are judged before the request starts, names by the lookup the
 * sockets use (so DNS rebinding cannot slip between check and connect), and both again on every
 * redirect hop. A refused address never gets a socket connected to it. No outbound proxy, no
 * retries: callers decide what a failure means. (The proxy keeps its own undici fast path, with
 * its address decisions taken from the same policy.)
 */

export interface OutboundRequest {
  method?: Method;
  headers?: Record<string, string>;
  /** One of: a raw body, a form (urlencoded) or JSON. */
  body?: string | Buffer;
  form?: Record<string, string>;
  json?: unknown;
  /** The whole exchange, to the end of the answer's body. */
  timeoutMs: number;
  /**
   * Off by default: a redirect would carry secrets wherever the answer points. On: each hop is
   * checked, and one to another origin (scheme, host or port) ends the request
   * (`cross_origin_redirect`), since its headers and body would go with it.
   */
  followRedirects?: boolean;
  /** The most of the answer's body kept in memory (default 1 MiB); past it the rest is dropped and `truncated` set. */
  maxResponseBytes?: number;
}

export interface OutboundResponse {
  statusCode: number;
  headers: IncomingHttpHeaders;
  /** Empty when the body was larger than `maxResponseBytes`. */
  body: string;
  truncated: boolean;
}

const DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024;

/**
 * Why no answer came. `reason` is a short code (upstream_not_allowed, invalid_url, timeout,
 * connection_refused, dns_not_found, connection_reset, too_many_redirects, cross_origin_redirect,
 * network_error); the
 * message names no URL, since paths and queries may carry secrets.
 */
export class OutboundRequestError extends Error {
  override readonly name = 'OutboundRequestError';
  readonly reason: string;
  /** Set when the address policy refused the host or an address it resolved to. */
  readonly refusal: UpstreamNotAllowedError | undefined;

  constructor(reason: string, refusal?: UpstreamNotAllowedError) {
    super(refusal ? refusal.message : `Outbound request failed: ${reason}`);
    this.reason = reason;
    this.refusal = refusal;
  }
}

export interface HttpClient {
  request(url: string | URL, options: OutboundRequest): Promise<OutboundResponse>;
  /** Closes idle keep-alive sockets. */
  close(): void;
}

export interface HttpClientOptions {
  policy: Pick<AddressPolicy, 'check'>;
  /** Redirects followed at most when a request asks to follow them. Default 5. */
  maxRedirects?: number;
  userAgent?: string;
  /** The resolver behind the checked lookup; tests give a fake DNS. */
  resolve?: ResolveAll;
}

/** The first error of `type` in `error`'s causes: got wraps what a hook or the lookup throws. */
function causeOf<T extends Error>(error: unknown, type: abstract new (...args: never[]) => T): T | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    if (current instanceof type) return current;
  }
  return undefined;
}

function reasonOf(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (code === 'ECONNREFUSED') return 'connection_refused';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'dns_not_found';
  if (code === 'ETIMEDOUT' || code === 'ESOCKETTIMEDOUT') return 'timeout';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'connection_reset';
  if (code === 'ERR_TOO_MANY_REDIRECTS') return 'too_many_redirects';
  return 'network_error';
}

export function createHttpClient(options: HttpClientOptions): HttpClient {
  const { policy } = options;
  const lookup = createSafeLookup(policy, options.resolve);
  // The lookup sits on the agents too, so no socket of this client is opened without it.
  const agent = {
    http: new HttpAgent({ keepAlive: true, maxSockets: 64, lookup }),
    https: new HttpsAgent({ keepAlive: true, maxSockets: 64, lookup }),
  };
  const client = got.extend({
    dnsLookup: lookup,
    agent,
    retry: { limit: 0 },
    throwHttpErrors: false,
    responseType: 'text',
    maxRedirects: options.maxRedirects ?? 5,
    headers: { 'user-agent': options.userAgent ?? 'Latchkey/1' },
    hooks: {
      beforeRequest: [(request) => checkUrlHost(request.url as URL, policy)],
      beforeRedirect: [
        (request, answer) => {
          const next = request.url as URL;
          if (next.protocol !== 'http:' && next.protocol !== 'https:') throw new OutboundRequestError('invalid_url');
          // got drops only `authorization` and `cookie` on a hop to another origin: an
          // `x-api-key`, or a form a 307 sends again, would go along. Only the same origin then.
          checkUrlHost(next, policy);
          if (next.origin !== new URL(answer.url).origin) throw new OutboundRequestError('cross_origin_redirect');
        },
      ],
    },
  });

  return {
    async request(url, request) {
      let target: URL;
      try {
        target = new URL(url);
      } catch {
        throw new OutboundRequestError('invalid_url');
      }
      if (target.protocol !== 'http:' && target.protocol !== 'https:') throw new OutboundRequestError('invalid_url');
      // Judged here too, so a refused literal fails before got is even asked.
      try {
        checkUrlHost(target, policy);
      } catch (error) {
        throw new OutboundRequestError('upstream_not_allowed', error as UpstreamNotAllowedError);
      }
      const limit = request.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
      const call = client(target, {
        method: request.method ?? 'GET',
        ...(request.headers ? { headers: request.headers } : {}),
        ...(request.body === undefined ? {} : { body: request.body }),
        ...(request.form === undefined ? {} : { form: request.form }),
        ...(request.json === undefined ? {} : { json: request.json }),
        followRedirect: request.followRedirects ?? false,
        timeout: { request: request.timeoutMs },
      });
      // A receiver cannot make us hold an unbounded answer: past the limit the download stops
      // and only the status and headers are kept.
      let head: Pick<OutboundResponse, 'statusCode' | 'headers'> | undefined;
      let tooLarge = false;
      // got announces the response only once its body is read; the socket's request says it at once.
      call.on('request', (outgoing: ClientRequest) => {
        outgoing.once('response', (response: IncomingMessage) => {
          head = { statusCode: response.statusCode ?? 0, headers: response.headers };
        });
      });
      call.on('downloadProgress', (progress: { transferred: number }) => {
        if (progress.transferred > limit && !tooLarge) {
          tooLarge = true;
          call.cancel();
        }
      });
      try {
        const response = await call;
        return { statusCode: response.statusCode, headers: response.headers, body: response.body, truncated: false };
      } catch (error) {
        if (tooLarge && head) return { ...head, body: '', truncated: true };
        const refusal = causeOf(error, UpstreamNotAllowedError);
        if (refusal) throw new OutboundRequestError('upstream_not_allowed', refusal);
        const ours = causeOf(error, OutboundRequestError);
        if (ours) throw ours;
        if ((error as { name?: unknown }).name === 'TimeoutError') throw new OutboundRequestError('timeout');
        throw new OutboundRequestError(reasonOf(error));
      }
    },
    close() {
      agent.http.destroy();
      agent.https.destroy();
    },
  };
}
