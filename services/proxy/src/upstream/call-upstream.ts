import type { LookupFunction } from 'node:net';
import { Readable } from 'node:stream';
import { Agent, type Dispatcher } from 'undici';
import { AppError } from '@latchkey/errors';
import { ALLOW_CIDRS_HINT, checkUrlHost, UpstreamNotAllowedError, type AddressPolicy } from '@latchkey/net';
import { countRefusedAddress } from './upstream-metrics.js';

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
  /** Connection pools to providers; every connection it opens resolves names through the policy's lookup. */
  dispatcher: Dispatcher;
  timeoutMs: number;
  /** The wait for an answer's head, when shorter than `timeoutMs` (the caller's deadline is nearer). */
  headersTimeoutMs?: number;
  maxRedirects: number;
}

/** Keep-alive pools to providers whose sockets connect only to addresses the lookup allowed. */
export function createUpstreamDispatcher(lookup: LookupFunction): Dispatcher {
  return new Agent({ connect: { lookup } });
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

/**
 * A provider's answer: status and headers as sent, and the body, read chunk by chunk. Reading
 * is flow-controlled: past a quarter MiB unread, the socket is paused until the reader catches up.
 */
export interface UpstreamResponse {
  status: number;
  /** Name and value pairs, names as the provider spelled them. */
  headers: Array<[string, string]>;
  /** The first value of a header, by lower-case name. */
  header(name: string): string | undefined;
  /** The next chunk of the body, or null at its end. */
  read(): Promise<Uint8Array | null>;
  /**
   * Waits, in one step, until the body has ended, more than `limit` bytes of it have come, or
   * `waitMs` passed, and takes what came: most answers are small and whole by then; a slow
   * stream (server-sent events) is not held back. Reading goes on with `read`.
   */
  readAhead(limit: number, waitMs: number): Promise<{ chunks: Uint8Array[]; complete: boolean }>;
  /**
   * The whole body, taken at once, when it has already ended within `limit` bytes (most small
   * answers have by the time their headers are read); otherwise undefined, and nothing taken.
   */
  takeComplete(limit: number): Uint8Array[] | undefined;
  /** Drops the rest of the body (the connection stays reusable). */
  discard(): void;
  /** Gives up on the response and its connection. */
  abort(): void;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** The HTTP client sets these itself, or refuses them: they describe the connection, not the message. */
const CLIENT_OWNED = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'expect', 'content-length']);
const HIGH_WATER_BYTES = 256 * 1024;
const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);

function networkError(error: unknown): Error {
  if (error instanceof UpstreamNotAllowedError) return error;
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof UpstreamNotAllowedError) return cause;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && TIMEOUT_CODES.has(code)) return new UpstreamNetworkError('ETIMEDOUT', 'the provider did not answer in time');
  // Sockets closed under a request show as undici's own code: a reset, for retries.
  const known = typeof code === 'string' && !code.startsWith('UND_ERR') ? code : 'ECONNRESET';
  return new UpstreamNetworkError(known, 'the provider could not be reached');
}

/** What of a discarded body (a redirect's, a retried answer's) is read before its request is aborted: bytes, then time. */
const DISCARD_BYTES = 64 * 1024;
const DISCARD_MS = 1_000;

/** One exchange on undici's handler interface: no stream objects for the common small answer. */
function send(call: UpstreamCall, options: UpstreamOptions): Promise<UpstreamResponse> {
  return new Promise((resolve, reject) => {
    // Node skips `lookup` for literal IPs: those are checked here, names in the lookup.
    checkUrlHost(call.url, options.policy);
    const headers: string[] = [];
    for (const [name, value] of call.sign ? [...call.headers, call.sign(call.method, call.url)] : call.headers) {
      if (!CLIENT_OWNED.has(name.toLowerCase())) headers.push(name, value);
    }

    const chunks: Uint8Array[] = [];
    let buffered = 0;
    let ended = false;
    let failure: Error | undefined;
    let waiting: { resolve(chunk: Uint8Array | null): void; reject(error: Error): void } | undefined;
    let ahead: { limit: number; timer: NodeJS.Timeout; resolve(head: { chunks: Uint8Array[]; complete: boolean }): void; reject(error: Error): void } | undefined;
    /** The reader ahead, no longer waiting (its timer cleared). */
    const takeReader = () => {
      const reader = ahead!;
      ahead = undefined;
      clearTimeout(reader.timer);
      return reader;
    };
    let resumeSocket: (() => void) | undefined;
    let paused = false;
    let discarding = false;
    /** What a discarded body may still send before its request is aborted. */
    let discardBudget = DISCARD_BYTES;
    let discardTimer: NodeJS.Timeout | undefined;
    /** Set at the first interim answer: the final head is awaited until the same deadline. */
    let interimTimer: NodeJS.Timeout | undefined;
    const headsUpAt = performance.now() + (options.headersTimeoutMs ?? options.timeoutMs);
    let abortRequest: ((reason: Error) => void) | undefined;
    let answered = false;

    /** Hands every buffered chunk to the reader ahead, and lets the socket flow again. */
    const takeAhead = (complete: boolean) => {
      const head = { chunks: chunks.splice(0), complete };
      buffered = 0;
      if (paused) {
        paused = false;
        resumeSocket?.();
      }
      return head;
    };
    const response: UpstreamResponse = {
      status: 0,
      headers: [],
      header(name) {
        return this.headers.find(([candidate]) => candidate.toLowerCase() === name)?.[1];
      },
      readAhead(limit, waitMs) {
        if (failure) return Promise.reject(failure);
        // Complete only within the limit: a body that ended past it still streams, for no message holds it.
        if (ended || buffered > limit) return Promise.resolve(takeAhead(ended && buffered <= limit));
        if (paused) {
          paused = false;
          resumeSocket?.();
        }
        return new Promise((resolveAhead, rejectAhead) => {
          const timer = setTimeout(() => {
            if (ahead) takeReader().resolve(takeAhead(false));
          }, waitMs);
          ahead = { limit, timer, resolve: resolveAhead, reject: rejectAhead };
        });
      },
      takeComplete(limit) {
        if (!ended || failure || buffered > limit) return undefined;
        return takeAhead(true).chunks;
      },
      read() {
        const chunk = chunks.shift();
        if (chunk) {
          buffered -= chunk.length;
          if (paused && buffered < HIGH_WATER_BYTES / 2) {
            paused = false;
            resumeSocket?.();
          }
          return Promise.resolve(chunk);
        }
        if (failure) return Promise.reject(failure);
        if (ended) return Promise.resolve(null);
        return new Promise((resolveRead, rejectRead) => (waiting = { resolve: resolveRead, reject: rejectRead }));
      },
      discard() {
        discarding = true;
        chunks.length = 0;
        buffered = 0;
        if (ended || failure) return;
        // A body nobody reads may still finish quickly (its socket then serves the next call), but
        // not for long: a provider trickling an endless body after a retried or redirected answer
        // would otherwise hold a socket for each, past every deadline.
        discardTimer = setTimeout(() => abortRequest?.(new Error('a discarded body did not end')), DISCARD_MS);
        if (paused) {
          paused = false;
          resumeSocket?.();
        }
      },
      abort() {
        abortRequest?.(new Error('the caller stopped reading'));
      },
    };

    const handler: Dispatcher.DispatchHandler = {
      onConnect(abort) {
        abortRequest = abort;
      },
      onHeaders(status, rawHeaders, resume) {
        // An interim answer (103 Early Hints, 102 Processing) is not the answer: the final one
        // follows, by the first head's deadline (undici starts its head timeout again at each).
        if (status < 200) {
          interimTimer ??= setTimeout(() => abortRequest?.(Object.assign(new Error('no final answer in time'), { code: 'UND_ERR_HEADERS_TIMEOUT' })), Math.max(0, headsUpAt - performance.now()));
          return true;
        }
        clearTimeout(interimTimer);
        resumeSocket = resume;
        response.status = status;
        for (let i = 0; i + 1 < rawHeaders.length; i += 2) response.headers.push([rawHeaders[i]!.toString('latin1'), rawHeaders[i + 1]!.toString('latin1')]);
        answered = true;
        resolve(response);
        return true;
      },
      onData(chunk) {
        if (discarding) {
          discardBudget -= chunk.length;
          if (discardBudget < 0) abortRequest?.(new Error('a discarded body went on too long'));
          return true;
        }
        if (waiting) {
          const reader = waiting;
          waiting = undefined;
          reader.resolve(chunk);
          return true;
        }
        chunks.push(chunk);
        buffered += chunk.length;
        if (ahead) {
          // Reading ahead buffers up to its own limit, unpaused.
          if (buffered <= ahead.limit) return true;
          takeReader().resolve(takeAhead(false));
          return true;
        }
        if (buffered < HIGH_WATER_BYTES) return true;
        paused = true;
        return false;
      },
      onComplete() {
        ended = true;
        clearTimeout(discardTimer);
        if (ahead) takeReader().resolve(takeAhead(true));
        waiting?.resolve(null);
        waiting = undefined;
      },
      onError(error) {
        clearTimeout(discardTimer);
        clearTimeout(interimTimer);
        const mapped = networkError(error);
        if (!answered) {
          reject(mapped);
          return;
        }
        failure = mapped;
        if (ahead) takeReader().reject(mapped);
        waiting?.reject(mapped);
        waiting = undefined;
      },
    };
    const body = call.body === null || call.body instanceof Uint8Array ? call.body : Readable.from(call.body, { objectMode: false });
    options.dispatcher.dispatch(
      {
        origin: call.url.origin,
        path: `${call.url.pathname}${call.url.search}`,
        method: call.method as Dispatcher.HttpMethod,
        headers,
        body,
        headersTimeout: options.headersTimeoutMs ?? options.timeoutMs,
        bodyTimeout: options.timeoutMs,
      },
      handler,
    );
  });
}

/**
 * One upstream exchange: sends the request to the address that passed the policy, follows
 * redirects (each hop checked again; credentials dropped when the origin changes; 303, but for
 * a HEAD, and 301/302 after a POST become GET without a body), and resolves with the final
 * response, its body unread.
 */
export async function callUpstream(call: UpstreamCall, options: UpstreamOptions): Promise<UpstreamResponse> {
  let current = call;
  for (let hop = 0; ; hop++) {
    let response: UpstreamResponse;
    try {
      response = await send(current, options);
    } catch (error) {
      if (error instanceof UpstreamNotAllowedError) {
        countRefusedAddress(error.reason);
        throw new AppError('upstream_not_allowed', `The upstream address is not allowed: ${error.reason}; ${ALLOW_CIDRS_HINT}`);
      }
      throw error;
    }
    const location = response.header('location');
    if (!REDIRECTS.has(response.status) || location === undefined || hop >= options.maxRedirects) return response;
    // A Location that is no URL, or not an HTTP one, is the provider's answer to pass on.
    const next = URL.parse(location, current.url.href);
    if (next === null || (next.protocol !== 'http:' && next.protocol !== 'https:')) return response;
    const status = response.status;
    // A HEAD stays a HEAD (RFC 9110 §15.4.4: the retrieval a 303 asks for is a GET or a HEAD).
    const toGet = (status === 303 && current.method !== 'HEAD') || ((status === 301 || status === 302) && current.method === 'POST');
    if (!toGet && current.body !== null && !(current.body instanceof Uint8Array)) return response; // a stream cannot be sent twice
    response.discard();
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
