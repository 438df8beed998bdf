import { request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { AppError } from '@latchkey/errors';
import { checkUrlHost, UpstreamNotAllowedError, type AddressPolicy } from '@latchkey/net';

export interface UpstreamCall {
  method: string;
  url: URL;
  headers: Array<[string, string]>;
  /** Sent as is; null for no body, or an iterable for a streamed one (not replayable). */
  body: Uint8Array | AsyncIterable<Uint8Array> | null;
  /** Headers that carry credentials: dropped when a redirect leaves the origin. */
  secretHeaders: ReadonlySet<string>;
  /** Signs each attempt and redirect hop anew (OAuth 1: a signature covers method and URL, a nonce is single-use). */
  sign?: (method: string, url: URL) => [string, string];
}

export interface UpstreamOptions {
  policy: AddressPolicy;
  lookup: LookupFunction;
  timeoutMs: number;
  maxRedirects: number;
}

/** A network failure that never produced an answer; `code` tells retryable ones apart. */
export class UpstreamNetworkError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

function send(call: UpstreamCall, options: UpstreamOptions): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    // Node skips `lookup` for literal IPs: those are checked here, names in the lookup.
    checkUrlHost(call.url, options.policy);
    const headers: OutgoingHttpHeaders = {};
    const signed = call.sign ? [...call.headers, call.sign(call.method, call.url)] : call.headers;
    for (const [name, value] of signed) {
      const existing = headers[name];
      headers[name] = existing === undefined ? value : [...(Array.isArray(existing) ? existing : [String(existing)]), value];
    }
    if (call.body instanceof Uint8Array) headers['content-length'] = String(call.body.length);
    const request = (call.url.protocol === 'https:' ? httpsRequest : httpRequest)(call.url, {
      method: call.method,
      headers,
      lookup: options.lookup,
      timeout: options.timeoutMs,
    });
    request.once('response', resolve);
    request.once('timeout', () => request.destroy(new UpstreamNetworkError('ETIMEDOUT', 'the provider did not answer in time')));
    request.once('error', (error: NodeJS.ErrnoException) => {
      if (error instanceof UpstreamNotAllowedError || error instanceof UpstreamNetworkError) reject(error);
      else if ((error as { cause?: unknown }).cause instanceof UpstreamNotAllowedError) reject((error as { cause: Error }).cause);
      else reject(new UpstreamNetworkError(error.code ?? 'ECONNRESET', 'the provider could not be reached'));
    });
    if (call.body === null) request.end();
    else if (call.body instanceof Uint8Array) request.end(call.body);
    else {
      void (async () => {
        try {
          for await (const chunk of call.body as AsyncIterable<Uint8Array>) {
            if (!request.write(chunk)) await new Promise((drained) => request.once('drain', drained));
          }
          request.end();
        } catch (error) {
          request.destroy(error as Error);
        }
      })();
    }
  });
}

/**
 * One upstream exchange: sends the request to the address that passed the policy, follows
 * redirects (each hop checked again; credentials dropped when the origin changes; 303 and
 * 301/302 after a POST become GET without a body), and resolves with the final response,
 * its body unread.
 */
export async function callUpstream(call: UpstreamCall, options: UpstreamOptions): Promise<IncomingMessage> {
  let current = call;
  for (let hop = 0; ; hop++) {
    let response: IncomingMessage;
    try {
      response = await send(current, options);
    } catch (error) {
      if (error instanceof UpstreamNotAllowedError) {
        throw new AppError('upstream_not_allowed', `The upstream address is not allowed: ${error.reason}`);
      }
      throw error;
    }
    const location = response.headers.location;
    if (!REDIRECTS.has(response.statusCode ?? 0) || location === undefined || hop >= options.maxRedirects) return response;
    response.resume();
    const next = new URL(location, current.url);
    if (next.protocol !== 'http:' && next.protocol !== 'https:') return response;
    const status = response.statusCode ?? 0;
    const toGet = status === 303 || ((status === 301 || status === 302) && current.method === 'POST');
    if (!toGet && current.body !== null && !(current.body instanceof Uint8Array)) return response; // a stream cannot be sent twice
    const sameOrigin = next.origin === current.url.origin;
    const { sign, ...rest } = current;
    current = {
      ...rest,
      // A signature is for this origin's credentials only.
      ...(sign && sameOrigin ? { sign } : {}),
      url: next,
      method: toGet ? 'GET' : current.method,
      body: toGet ? null : current.body,
      headers: current.headers.filter(
        ([name]) => (sameOrigin || !current.secretHeaders.has(name.toLowerCase())) && !(toGet && /^content-/i.test(name)),
      ),
    };
  }
}
